"""The interface every engine has on the controller's side of the torch line: what a sweep asks of it before and after
its trials (the training itself is workers/engines/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from sweeps.spec import GRPOSpec, SweepSpec


class Engine(Protocol):
    """Who trains a sweep's trials, as the spec, the controller and ``recommend`` see it (torch-free: a library an
    engine needs is imported inside the method that needs it).

    name: the spec's ``engine:`` (its trainer: workers.engines.TRAINERS); cluster_check: ``"module:function"`` run on a
    Ray worker at submit (None: nothing to check there); adds_lora: whether the trial's policy gets its LoRA adapter
    from groupscale (else the engine hands the settings to its trainer).
    """

    name: ClassVar[str]
    cluster_check: ClassVar[str | None]
    adds_lora: ClassVar[bool]

    def check_here(self, spec: SweepSpec) -> None:
        """What needs this process's packages (the controller's), at submit. Raises ValueError, its message starting
        with the field (``trl.beta: ...``) when it names one."""

    def trial_grpo(self, spec: SweepSpec, lr: float | None) -> GRPOSpec:
        """The GRPO settings a trial's config carries (its held-out evaluation samples with them), with a tuned lr."""

    def run_params(self, spec: SweepSpec) -> dict[str, Any]:
        """MLflow params the controller puts on every trial run of the spec, beyond task, model, T and measure."""

    def flat_metrics(self, spec: SweepSpec) -> dict[str, str]:
        """Metric -> why it is constant by construction and so not logged (said in each trial run's note)."""

    def step_structure(self, spec: SweepSpec) -> list[str] | None:
        """How each budget B is split into optimizer steps, one line per B (None: one step of B, nothing to say)."""

    def sampled(self, spec: SweepSpec, steps: int, samples_per_step: int) -> int:
        """Completions sampled to train ``steps`` optimizer steps at budget B = ``samples_per_step`` (what `answer`
        and its budget count)."""

    def one_process_per_trial(self, spec: SweepSpec) -> bool:
        """Whether each trial needs a worker process of its own (no warm worker takes the next one)."""

    def trl_config(self, group_size: int, samples_per_step: int, spec: SweepSpec, num_processes: int) -> tuple[dict, list[str]]:
        """``recommend --format trl``: GRPOConfig settings for G and B that train what the sweep measured, and notes.
        Raises ValueError when G and B cannot be set so on ``num_processes`` processes."""

    def verl_overrides(self, group_size: int, samples_per_step: int, spec: SweepSpec) -> tuple[list[str], list[str]]:
        """``recommend --format verl``: hydra overrides and notes. Raises ValueError when verl cannot express it."""
