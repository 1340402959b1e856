"""What one trial runs, as plain data: TrialConfig, built from a sweep spec and a planned (G, B, seed).

Torch-free, so the controller builds configs without importing the trainer; the dataclass travels
to Ray workers as a dict (``TrialConfig(**cfg.to_dict())``). The GRPO hyper-parameters are the
spec's own ``GRPOSpec`` (``cfg.grpo``), so their names and defaults live in sweeps.spec alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from sweeps.planner import TrialPlan, prompts_per_step
from sweeps.spec import GRPOSpec, SweepSpec

Report = Callable[[dict[str, float], int], None]  # a report with a flush() is flushed at each checkpoint


@dataclass(frozen=True)
class TrialConfig:
    """Everything one trial needs (plain data, so it travels to Ray workers)."""

    task: dict[str, Any]
    model: dict[str, Any]
    group_size: int  # G
    samples_per_step: int  # B
    seed: int
    steps: int  # T
    grpo: GRPOSpec = field(default_factory=GRPOSpec)  # a dict (to_dict's) is read as one
    eval_prompts: int = 512
    eval_samples_per_prompt: int = 4  # sampled eval (tasks without an exact expected reward)
    eval_batch_size: int = 256  # completions per generation pass of the eval
    eval_every: int = 0  # steps between held-out evals before the final one; 0: only the final one
    probe_every: int = 0  # steps between in-trial probes of the current policy (probe.every); 0: none
    probe: dict[str, Any] = field(default_factory=dict)  # the spec's probe settings, for probe_every
    measure: str = "outcome"  # or gradient_mse (workers.gradient_mse)
    mse_repeats: int = 256
    cache_dir: str = ".groupscale/models"
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0  # steps; 0 disables
    device: str = "cpu"  # or cuda (bf16 autocast)
    num_threads: int = 1
    engine: str = "groupscale"  # or trl: TRL's GRPOTrainer on the recipe ``trl`` (workers.trl_engine)
    trl: dict[str, Any] = field(default_factory=dict)  # GRPOConfig fields of engine trl

    @property
    def prompts_per_step(self) -> int:  # N
        return prompts_per_step(self.samples_per_step, self.group_size)

    def __post_init__(self) -> None:
        """Raises ValueError unless 2 <= G and G divides B; TypeError for a grpo dict with unknown keys."""
        if isinstance(self.grpo, dict):  # trusted plain data (a validated spec's, or a test's): not re-validated
            unknown = set(self.grpo) - set(GRPOSpec.model_fields)
            if unknown:
                raise TypeError(f"unknown grpo fields {sorted(unknown)}; valid: {', '.join(GRPOSpec.model_fields)}")
            object.__setattr__(self, "grpo", GRPOSpec.model_construct(**self.grpo))
        if self.group_size < 2:
            raise ValueError(f"group_size (G) must be >= 2, got {self.group_size}")
        if self.samples_per_step % self.group_size:
            raise ValueError(f"group_size (G) {self.group_size} does not divide samples_per_step (B) {self.samples_per_step}")

    @classmethod
    def flat(cls, **kwargs: Any) -> TrialConfig:
        """A config from keyword arguments where the GRPO fields (lr, clip_eps, ...) are given at the top
        level, as benchmarks and tests write them. Raises TypeError for unknown names."""
        grpo = {k: kwargs.pop(k) for k in list(kwargs) if k in GRPOSpec.model_fields}
        base = kwargs.pop("grpo", None) or {}
        return cls(**kwargs, grpo={**(base.model_dump() if isinstance(base, GRPOSpec) else base), **grpo})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data: ``TrialConfig(**cfg.to_dict())`` gives the config back."""
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "grpo": self.grpo.model_dump()}

    def with_grpo(self, **changes: Any) -> TrialConfig:
        """This config with some GRPO fields changed (e.g. ``lr``)."""
        return replace(self, grpo=self.grpo.model_copy(update=changes))

    @classmethod
    def from_spec(
        cls,
        spec: SweepSpec,
        plan: TrialPlan,
        cache_dir: str | Path,
        checkpoint_dir: str | Path | None = None,
        lr: float | None = None,
    ) -> TrialConfig:
        """The trial at ``plan`` of ``spec``; ``lr`` (a tuned learning rate) replaces the spec's when given."""
        return cls(
            task=spec.task.model_dump(),
            model=spec.model.model_dump(exclude_none=True),
            group_size=plan.group_size,
            samples_per_step=plan.samples_per_step,
            seed=plan.seed,
            steps=spec.steps,
            grpo=_grpo(spec, lr),
            eval_prompts=spec.eval.prompts,
            eval_samples_per_prompt=spec.eval.samples_per_prompt,
            eval_batch_size=spec.eval.batch_size,
            eval_every=spec.eval.every or 0,
            probe_every=spec.probe.every or 0,
            probe=spec.probe.model_dump(exclude={"every"}),
            measure=spec.measure.kind,
            mse_repeats=spec.measure.repeats,
            cache_dir=str(cache_dir),
            checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
            checkpoint_every=spec.checkpoint_every,
            device="cuda" if spec.resources.gpus_per_trial > 0 else "cpu",
            num_threads=max(1, int(spec.resources.cpus_per_trial)),
            engine=spec.engine,
            trl=spec.trl_recipe,
        )


TRL_SAMPLING_DEFAULTS = {"max_completion_length": 256, "temperature": 1.0}  # GRPOConfig's defaults


def _grpo(spec: SweepSpec, lr: float | None) -> GRPOSpec:
    """The trial's GRPO settings: the spec's (with a tuned ``lr``); under engine trl, the held-out eval samples as the
    recipe does (its max_completion_length and temperature, TRL's defaults when it sets none)."""
    if spec.engine == "trl":
        recipe = {**TRL_SAMPLING_DEFAULTS, **spec.trl_recipe}
        return spec.grpo.model_copy(
            update={"max_new_tokens": int(recipe["max_completion_length"]), "temperature": float(recipe["temperature"])}
        )
    return spec.grpo if lr is None else spec.grpo.model_copy(update={"lr": lr})


@dataclass
class TrialResult:
    """status: succeeded | failed | no_signal; metrics: final metrics; reason: why, if not succeeded."""

    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    steps_done: int = 0
