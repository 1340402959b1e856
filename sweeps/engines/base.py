"""What an engine is on the controller's side of the torch line: one class per engine, registered by name, that says
what a sweep asks of it before and after its trials (the training itself: the engine's ``trainer`` on a worker).

The model is verl's ``EngineRegistry.register`` (verl/workers/engine/base.py): a member is one declaration, the
registry (sweeps.spec.ENGINES, which the spec validates against) is the one list of names (the spec's ``engine:``, the
CLI's ``--engine`` and the workers' trainers are read from it), and what every member shares lives here, in the base.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from sweeps.spec.base import ENGINES, get_engine
from sweeps.spec.grpo import GRPOSpec
from sweeps.spec.sweep import SweepSpec


@dataclass(frozen=True)
class Recipe:
    """The objective a sweep's trials train, normalised: what every export reads (sweeps.exports).

    Attributes:
        grpo: the loss and sampling settings in groupscale's names (a TRL recipe's with TRL's defaults filled in).
        optimizer_steps_per_generation: k, optimizer steps each generation batch of B completions feeds (a whole
            number, or 1/n: n generations a step); 1 on groupscale's trainer (each step samples its own B).
        trl: the TRL recipe the sweep trained as written (GRPOConfig fields; engine trl), else None.
    """

    grpo: GRPOSpec
    optimizer_steps_per_generation: Fraction = Fraction(1)
    trl: dict[str, Any] | None = None


class Engine:
    """Who trains a sweep's trials, as the spec, the controller and the exports see it. Torch-free: a library a member
    needs is imported inside the method that needs it.

    Attributes:
        name: the spec's ``engine:``.
        trainer: ``"module:function"`` that trains one outcome trial on a worker (workers.measures.trainer imports it).
        section: the spec's section of this engine's own settings (``trl``), None when it reads ``grpo:`` alone.
        holds: what that section holds, in words (said when another engine's spec has it).
        cluster_check: ``"module:function"`` run on a Ray worker at submit (None: nothing to check there); ``checks``
            says what it checks, in words.
        adds_lora: whether a trial's policy gets its LoRA adapter from groupscale (else the trainer gets the settings).
    """

    name: ClassVar[str]
    trainer: ClassVar[str]
    section: ClassVar[str | None] = None
    holds: ClassVar[str] = ""
    cluster_check: ClassVar[str | None] = None
    checks: ClassVar[str] = ""
    adds_lora: ClassVar[bool] = True

    def check_sections(self, data: dict[str, Any]) -> None:
        """What the spec's other sections may hold under this engine (run as the spec validates: ``data`` holds every
        field before the engines' sections, and each section, None when absent). The base refuses the sections of the
        other engines. Raises ValueError naming the field and what is allowed."""
        for other in ENGINES.values():
            if other.section and other.section != self.section and data.get(other.section) is not None:
                raise ValueError(
                    f"{other.section}: holds {other.holds} for engine {other.name}; set engine: {other.name}, or use "
                    "grpo: (groupscale's names)"
                )

    def check_here(self, spec: SweepSpec) -> None:
        """What needs this process's packages (the controller's), at submit. Raises ValueError, its message starting
        with the field (``trl.beta: ...``) when it names one."""

    def recipe(self, spec: SweepSpec) -> Recipe:
        """The objective the spec's trials train (groupscale's trainer: ``grpo:``, its k optimizer steps per B)."""
        return Recipe(spec.grpo, Fraction(spec.grpo.steps_per_generation))

    def trial_grpo(self, spec: SweepSpec, lr: float | None) -> GRPOSpec:
        """The GRPO settings a trial's config carries (its held-out evaluation samples with them), with a tuned lr."""
        return spec.grpo if lr is None else spec.grpo.model_copy(update={"lr": lr})

    def run_params(self, spec: SweepSpec) -> dict[str, Any]:
        """MLflow params the controller puts on every trial run of the spec, beyond task, model, T and measure."""
        return {}

    def flat_metrics(self, spec: SweepSpec) -> dict[str, str]:
        """Metric -> why it is constant by construction and so not logged (said in each trial run's note)."""
        return {}

    def step_structure(self, spec: SweepSpec) -> list[str] | None:
        """How each budget B is split into optimizer steps, one line per B (None: one step of B, nothing to say)."""
        return None

    def sampled(self, spec: SweepSpec, steps: int, samples_per_step: int) -> int:
        """Completions sampled to train ``steps`` optimizer steps at budget B = ``samples_per_step`` (what `answer`
        and its budget count): one generation of B a step unless the member says otherwise."""
        return steps * samples_per_step

    def one_process_per_trial(self, spec: SweepSpec) -> bool:
        """Whether each trial needs a worker process of its own (no warm worker takes the next one)."""
        return False


def register_engine(cls: type[Engine]) -> type[Engine]:
    """Class decorator: add an instance of ``cls`` to the registry (sweeps.spec.ENGINES: the spec's ``engine:``
    allows its names) under ``cls.name``. Raises ValueError for a name that is taken."""
    if cls.name in ENGINES:
        raise ValueError(f"engine {cls.name!r} is registered twice ({type(ENGINES[cls.name]).__name__}, {cls.__name__})")
    ENGINES[cls.name] = cls()
    return cls


__all__ = ["ENGINES", "Engine", "Recipe", "get_engine", "register_engine"]
