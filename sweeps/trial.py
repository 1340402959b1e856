"""One trial as typed values: what it runs (TrialConfig, built from a sweep spec and a (G, B, seed)) and how it ended
(TrialOutcome, TrialResult).

Torch-free, so the controller builds configs and reads results without importing the trainer; the config travels
to Ray workers as a dict (``TrialConfig(**cfg.to_dict())``). The GRPO hyper-parameters, the eval, the
probe and the measure are the spec's own sections (``cfg.grpo``, ``cfg.eval``, ``cfg.probe``, ``cfg.measure``),
so their names and defaults live in sweeps.spec alone.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sweeps.engines import get_engine
from sweeps.planner import prompts_per_step
from sweeps.spec import EvalSpec, GRPOSpec, MeasureSpec, ProbeSpec, SweepSpec

# the spec's sections a config nests
SECTIONS: dict[str, type[BaseModel]] = {"grpo": GRPOSpec, "eval": EvalSpec, "probe": ProbeSpec, "measure": MeasureSpec}
# TrialConfig.flat's names for nested settings, as benchmarks and tests write them: name -> (section, field)
FLAT_NAMES = {
    "eval_prompts": ("eval", "prompts"),
    "eval_samples_per_prompt": ("eval", "samples_per_prompt"),
    "eval_batch_size": ("eval", "batch_size"),
    "eval_every": ("eval", "every"),
    "probe_every": ("probe", "every"),
    "mse_repeats": ("measure", "repeats"),
}


@dataclass(frozen=True)
class TrialConfig:
    """Everything one trial needs (plain data, so it travels to Ray workers): the policy it starts from and samples
    with (task, model, its LoRA adapter, device, threads, seed; the sampling of ``grpo``), its (G, B, seed, T), its
    spec's sections and where it keeps checkpoints."""

    task: dict[str, Any]
    model: dict[str, Any]
    group_size: int  # G
    samples_per_step: int  # B (with tokens_per_step: the most a generation may sample)
    seed: int
    steps: int  # T
    grpo: GRPOSpec = field(default_factory=GRPOSpec)  # each section: a dict (to_dict's) is read as one
    eval: EvalSpec = field(default_factory=EvalSpec)  # eval.every: held-out evals before the final one
    probe: ProbeSpec = field(default_factory=ProbeSpec)  # probe.every: in-trial probes of the current policy
    measure: MeasureSpec = field(default_factory=MeasureSpec)  # outcome, or gradient_mse (workers.gradient_mse)
    cache_dir: str = ".groupscale/models"
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0  # steps; 0 disables
    device: str = "cpu"  # or cuda (bf16 autocast)
    num_threads: int = 1  # torch threads of each process
    num_processes: int = 1  # P: the trial's ranks (workers.distributed); each trains whole groups of the step
    engine: str = "groupscale"  # or trl: TRL's GRPOTrainer on the recipe ``trl`` (workers.engines.trl)
    trl: dict[str, Any] = field(default_factory=dict)  # GRPOConfig fields of engine trl
    tokens_per_step: int | None = None  # Z: a budget in completion tokens a step (workers.token_budget)

    @property
    def prompts_per_step(self) -> int:  # N
        return prompts_per_step(self.samples_per_step, self.group_size)

    def __post_init__(self) -> None:
        """Reads each section given as a dict; raises TypeError for one with unknown keys. The group size is not
        checked again here: a config holds a validated spec's values (SweepSpec: 2 <= G, G divides B; then
        service.preflight's server limits), the only two checks on the way from the YAML to the loss."""
        for name, model in SECTIONS.items():
            value = getattr(self, name)
            if isinstance(value, dict):  # trusted plain data (a validated spec's, or a test's): not re-validated
                unknown = set(value) - set(model.model_fields)
                if unknown:
                    raise TypeError(f"unknown {name} fields {sorted(unknown)}; valid: {', '.join(model.model_fields)}")
                object.__setattr__(self, name, _construct(model, value))

    @classmethod
    def flat(cls, **kwargs: Any) -> TrialConfig:
        """A config from keyword arguments as benchmarks and tests write them: the GRPO fields (lr, clip_eps, ...)
        at the top level, the nested settings by FLAT_NAMES (eval_prompts, probe_every, mse_repeats, ...), and
        ``measure`` as its kind ("gradient_mse"). Raises TypeError for unknown names."""
        if isinstance(kwargs.get("measure"), str):
            kwargs["measure"] = {"kind": kwargs["measure"]}
        sections = {name: _plain(kwargs.pop(name, None)) for name in SECTIONS}
        sections["grpo"] |= {k: kwargs.pop(k) for k in list(kwargs) if k in GRPOSpec.model_fields}
        for name, (section, key) in FLAT_NAMES.items():
            if name in kwargs:
                value = kwargs.pop(name)
                sections[section][key] = None if key == "every" and not value else value  # every 0: none
        return cls(**kwargs, **sections)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data: ``TrialConfig(**cfg.to_dict())`` gives the config back."""
        plain = {f.name: getattr(self, f.name) for f in fields(self)}
        return plain | {name: getattr(self, name).model_dump() for name in SECTIONS}

    def with_grpo(self, **changes: Any) -> TrialConfig:
        """This config with some GRPO fields changed (e.g. ``lr``)."""
        return replace(self, grpo=self.grpo.model_copy(update=changes))

    @classmethod
    def for_trial(
        cls,
        spec: SweepSpec,
        group_size: int,
        samples_per_step: int,
        seed: int,
        cache_dir: str | Path,
        checkpoint_dir: str | Path | None = None,
        lr: float | None = None,
    ) -> TrialConfig:
        """The trial of ``spec`` at (G, B, seed); ``lr`` (a tuned learning rate) replaces the spec's when given."""
        return cls(
            task=spec.task.model_dump(),
            model=spec.model.model_dump(exclude_none=True),
            group_size=group_size,
            samples_per_step=samples_per_step,
            seed=seed,
            steps=spec.steps,
            grpo=get_engine(spec.engine).trial_grpo(spec, lr),
            **{name: getattr(spec, name) for name in SECTIONS if name != "grpo"},  # eval, probe, measure: the spec's
            cache_dir=str(cache_dir),
            checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
            checkpoint_every=spec.checkpoint_every,
            device="cuda" if spec.resources.gpus_per_process > 0 else "cpu",
            num_threads=max(1, int(spec.resources.cpus_per_process)),
            num_processes=spec.resources.num_processes,
            engine=spec.engine,
            trl=spec.trl_recipe,
            tokens_per_step=spec.tokens_per_step,
        )

    @classmethod
    def first_of(cls, spec: SweepSpec, cache_dir: str | Path) -> TrialConfig:
        """The trial a grid sweep runs first (sweeps.planner.plan_trials: the largest G at the smallest B, the first seed):
        what a probe or a check at submit sets its task, model and sampling from."""
        return cls.for_trial(spec, max(spec.group_sizes), min(spec.samples_per_step), spec.seeds[0], cache_dir)


def _construct(model: type[BaseModel], value: dict[str, Any]) -> BaseModel:
    """``model`` of trusted plain data, not validated (model_construct), a nested section's dict as its model
    (``grpo.dynamic_sampling``), so that model_dump gives the same data back."""
    out = dict(value)
    for key, v in value.items():
        kinds = typing.get_args(model.model_fields[key].annotation) or (model.model_fields[key].annotation,)
        sub = next((t for t in kinds if isinstance(t, type) and issubclass(t, BaseModel)), None)
        if isinstance(v, dict) and sub is not None:
            out[key] = _construct(sub, v)
    return model.model_construct(**out)


def _plain(section: Any) -> Any:
    """A section given to TrialConfig.flat as plain data: a model's fields as a dict, a dict copied, None as {}."""
    return {} if section is None else section.model_dump() if isinstance(section, BaseModel) else dict(section)


class TrialOutcome(StrEnum):
    """How a trial ended, as its trainer says (the controller's TrialStatus takes it as is)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    NO_SIGNAL = "no_signal"  # most generations had equal rewards in every group: not a data point


@dataclass
class TrialResult:
    """status: a TrialOutcome (a plain string is read as one); metrics: the final metrics; reason: why, if not
    succeeded; steps_done: optimizer steps (or measurement repeats) completed.

    Raises:
        ValueError: a status that is not a TrialOutcome, naming the valid ones.
    """

    status: TrialOutcome
    metrics: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    steps_done: int = 0

    def __post_init__(self) -> None:
        try:
            self.status = TrialOutcome(self.status)
        except ValueError:
            raise ValueError(f"unknown trial outcome {self.status!r}; valid: {', '.join(TrialOutcome)}") from None
