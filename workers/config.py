"""What one trial runs, as plain data: TrialConfig, built from a sweep spec and a planned (G, B, seed).

Torch-free, so the controller builds configs without importing the trainer; the dataclass travels
to Ray workers as a dict (``TrialConfig(**asdict(cfg))``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeps.planner import TrialPlan
from sweeps.spec import SweepSpec

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
    advantage: str = "loo"
    optimizer: str = "adamw"
    lr: float = 2e-4
    temperature: float = 1.0
    max_new_tokens: int = 4
    clip_eps: float = 0.2
    clip_eps_high: float | None = None
    reward_scale: float = 1.0
    inner_steps: int = 1
    kl_beta: float = 0.0
    loss_aggregation: str = "seq_mean_token_mean"
    max_grad_norm: float = 1.0
    eval_prompts: int = 512
    eval_samples_per_prompt: int = 4  # sampled eval (tasks without an exact expected reward)
    eval_batch_size: int = 256  # completions per generation pass of the eval
    micro_batch_size: int | None = None  # completions per forward/backward pass; None: all of B
    generation_batch_size: int | None = None  # completions per generate() call; None: all of B
    gradient_checkpointing: bool = False
    measure: str = "outcome"  # or gradient_mse (workers.gradient_mse)
    mse_repeats: int = 256
    cache_dir: str = ".groupscale/models"
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0  # steps; 0 disables
    device: str = "cpu"  # or cuda (bf16 autocast)
    num_threads: int = 1

    @property
    def prompts_per_step(self) -> int:  # N
        return self.samples_per_step // self.group_size

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ValueError(f"group_size (G) must be >= 2, got {self.group_size}")
        if self.samples_per_step % self.group_size:
            raise ValueError(f"group_size (G) {self.group_size} does not divide samples_per_step (B) {self.samples_per_step}")

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
        g = spec.grpo
        return cls(
            task=spec.task.model_dump(),
            model=spec.model.model_dump(exclude_none=True),
            group_size=plan.group_size,
            samples_per_step=plan.samples_per_step,
            seed=plan.seed,
            steps=spec.steps,
            advantage=g.advantage,
            optimizer=g.optimizer,
            lr=g.lr if lr is None else lr,
            temperature=g.temperature,
            max_new_tokens=g.max_new_tokens,
            clip_eps=g.clip_eps,
            clip_eps_high=g.clip_eps_high,
            reward_scale=g.reward_scale,
            inner_steps=g.inner_steps,
            kl_beta=g.kl_beta,
            loss_aggregation=g.loss_aggregation,
            max_grad_norm=g.max_grad_norm,
            eval_prompts=spec.eval.prompts,
            eval_samples_per_prompt=spec.eval.samples_per_prompt,
            eval_batch_size=spec.eval.batch_size,
            micro_batch_size=g.micro_batch_size,
            generation_batch_size=g.generation_batch_size,
            gradient_checkpointing=g.gradient_checkpointing,
            measure=spec.measure.kind,
            mse_repeats=spec.measure.repeats,
            cache_dir=str(cache_dir),
            checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
            checkpoint_every=spec.checkpoint_every,
            device="cuda" if spec.resources.gpus_per_trial > 0 else "cpu",
            num_threads=max(1, int(spec.resources.cpus_per_trial)),
        )


@dataclass
class TrialResult:
    """status: succeeded | failed | no_signal; metrics: final metrics; reason: why, if not succeeded."""

    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    steps_done: int = 0
