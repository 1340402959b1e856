"""The spec's smaller sections: eval, measure, probe, answer, resources, adaptive, tune_lr."""

from __future__ import annotations

import json
from typing import Any, Literal, TypeGuard

from pydantic import Field, ValidationInfo, field_validator, model_validator

from sweeps.spec.base import StrictModel

AUTO_EVALS = 4  # eval.every auto: the held-out eval at about T/4, T/2, 3T/4 and T (and before step 1)


AnswerMethodName = Literal["staged", "tracking"]  # sweeps.answer.METHODS's names (a test holds them equal)


class EvalSpec(StrictModel):
    prompts: int = Field(512, ge=1, le=100_000, description="held-out prompts for the final eval")
    samples_per_prompt: int = Field(
        4, ge=1, le=1024, description="sampled completions per held-out prompt (tasks without an exact expected reward)"
    )
    batch_size: int = Field(256, ge=1, le=100_000, description="completions per generation pass of the eval")
    every: Literal["auto"] | int | None = Field(
        "auto",
        description="also evaluate every this many steps (same prompts and seed; metric gap at that step, the fit's "
        f"by_step and the test of G* across training time); auto: every ceil(T/{AUTO_EVALS}) steps, so gap is a "
        "curve of a few points; 0 or null: only before step 1 and at T",
    )

    @field_validator("every", mode="before")
    @classmethod
    def _every(cls, v: object) -> object:
        """One message for every wrong value (the union's own errors name its members, not the allowed values)."""
        if v is None or v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 100_000):
            return v
        shown = json.dumps(v, default=str)  # as the user wrote it in YAML or JSON: true, "5"
        raise ValueError(
            f"{shown} is not allowed; allowed: auto, an integer 0..100000 (steps), or null (0 and null: evaluate only "
            "before step 1 and at T)"
        )

    def interval(self, steps: int) -> int | None:
        """Steps between held-out evals in a trial of T = ``steps`` steps (``every`` with auto resolved); None: none
        before T. Auto is ceil(T / AUTO_EVALS), so a trial is evaluated at most AUTO_EVALS times after step 0."""
        if self.every == "auto":
            return -(-steps // AUTO_EVALS) if steps > 1 else None
        return self.every or None

    def checkpoints(self, steps: int) -> list[int]:
        """The steps at which a trial of T = ``steps`` steps is evaluated: every ``interval(T)`` steps, and T."""
        k = self.interval(steps)
        return sorted({*range(k, steps, k), steps} if k else {steps})


class MeasureSpec(StrictModel):
    """What a trial measures: ``outcome`` (train T steps, then the held-out gap) or ``gradient_mse``
    (at the starting policy, the batch gradient's MSE against the exact gradient over ``repeats`` draws)."""

    kind: Literal["outcome", "gradient_mse"] = "outcome"
    repeats: int = Field(256, ge=2, le=100_000, description="gradient draws per trial (gradient_mse)")

    @property
    def metric(self) -> str:
        """The trial metric the law is fitted to."""
        return "gap" if self.kind == "outcome" else "grad_mse"


class ProbeSpec(StrictModel):
    """The variance-component probe: K prompts x M completions at the starting policy."""

    prompts: int = Field(256, ge=2, le=100_000, description="K, prompts")
    completions: int = Field(16, ge=4, le=1024, description="M, completions per prompt (>= 4)")
    projection_dim: int = Field(512, ge=8, le=65_536, description="score vectors are sketched to this size when larger")
    parameters: str = Field(
        "all",
        pattern=r"^(all|lm_head|lora|last_layers:[1-9][0-9]{0,3})$",
        description="scores over: all, lm_head, lora (the adapter of model.lora), or last_layers:K (the last K layers, "
        "the final norm, the LM head)",
    )
    seed: int = Field(0, ge=0, le=2**31 - 1)
    every: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="also run these estimators inside every trial on its current policy every this many steps "
        "(metrics probe_tau2, probe_sigma2, probe_kappa, probe_g_star at that step)",
    )


class AnswerSpec(StrictModel):
    """``groupscale answer``: the budget of the cheap answer (sweeps.answer) and the pass-rate rule it is compared with."""

    method: AnswerMethodName = Field(
        "tracking", description="the answer method (sweeps.answer.METHODS): tracking (the default) or staged"
    )
    budget: int | None = Field(
        None, ge=1, le=10**12, description="sampled completions it may spend (default: 1% of the grid this spec describes)"
    )
    epsilon: float = Field(
        0.05, gt=0, lt=1, description="eps of the pass-rate rule G >= 1 / (8 eps p (1 - p)) (arXiv 2607.00152), for its regret"
    )
    baseline_group_size: int = Field(
        8,
        ge=2,
        le=4096,
        description="the G you train with today (TRL's num_generations, verl's rollout.n; the importers fill it): the "
        "answer says to keep it unless moving measurably pays",
    )


MAX_PROCESSES = 512
PROCESS_LIMITS = {"cpus": (0.0, 256.0), "gpus": (0.0, 1.0)}  # a process's: CPUs more than 0, GPUs 0 or more


def _number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _ray_amount(v: float) -> bool:
    """Whether Ray takes ``v`` as a CPU or GPU amount: a multiple of 0.0001 (it refuses a finer one when the actor is
    made, which would fail every launch of the trial)."""
    return abs(v * 10_000 - round(v * 10_000)) <= 1e-6


def _within(kind: str, per_process: float) -> bool:
    """Whether a process's CPUs or GPUs lie within PROCESS_LIMITS (CPUs above 0, GPUs from 0) in Ray's steps."""
    lo, hi = PROCESS_LIMITS[kind]
    return (per_process > lo or kind == "gpus" and per_process == lo) and per_process <= hi and _ray_amount(per_process)


class ResourcesSpec(StrictModel):
    """What a trial asks Ray for: ``num_processes`` processes (accelerate's name for P: the ranks of one
    torch.distributed group, one Ray placement group of P bundles), each with ``cpus_per_process`` CPUs and
    ``gpus_per_process`` GPUs. ``cpus_per_trial`` and ``gpus_per_trial`` are the whole trial's (P times a process's):
    for a one-process trial the same numbers, the names specs used before processes were counted. Give either name;
    the other is derived (a process's default: 1 CPU, no GPU)."""

    num_processes: int = Field(
        1, ge=1, le=MAX_PROCESSES, description="processes of one trial (torch.distributed ranks; groups are split whole)"
    )
    gpus_per_trial: float = Field(0, ge=0, le=512, description="the trial's GPUs: num_processes x gpus_per_process")
    cpus_per_trial: float = Field(1, gt=0, le=512 * 256, description="the trial's CPUs: num_processes x cpus_per_process")
    gpus_per_process: float = Field(0, ge=0, description="0, a fraction (processes share a GPU) or 1")
    cpus_per_process: float = Field(1, gt=0, le=256)

    @model_validator(mode="before")
    @classmethod
    def _per_process(cls, data: Any) -> Any:
        """Fill the name not given from the one given: per trial = P x per process. A value that is not a number, or
        is out of its own bounds, is left to that field's error (nothing is derived from it)."""
        if not isinstance(data, dict):
            return data
        p = data.get("num_processes", 1)
        if not _number(p) or not float(p).is_integer() or not 1 <= p <= MAX_PROCESSES:
            return data  # num_processes's own error (nothing is derived from it)
        data = dict(data)
        for kind, default in (("cpus", 1.0), ("gpus", 0.0)):
            given = {k: data[k] for k in (f"{kind}_per_trial", f"{kind}_per_process") if k in data}
            if not all(_number(v) for v in given.values()):
                continue  # a null or a wrong type is the field's error
            trial, process = given.get(f"{kind}_per_trial"), given.get(f"{kind}_per_process")
            if trial is not None and process is not None:
                if abs(trial - p * process) > 1e-9 * max(1.0, abs(trial)):
                    raise ValueError(
                        f"resources.{kind}_per_trial={trial:g} is not num_processes x {kind}_per_process = {p} x "
                        f"{process:g}; give one of the two ({kind}_per_process for each process, {kind}_per_trial for "
                        "the whole trial)"
                    )
                continue
            process = (default if trial is None else trial / p) if process is None else process
            if _within(kind, process):
                data[f"{kind}_per_process"], data[f"{kind}_per_trial"] = float(process), float(p * process)
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _given(cls, data: Any, handler: Any) -> Any:
        """Runs first (before _per_process): the names _per_process derives are left out of ``model_fields_set``, which
        then holds the names the spec gave (``named``)."""
        res = handler(data)
        if isinstance(data, dict):
            derived = {f"{k}_per_{u}" for k in ("cpus", "gpus") for u in ("trial", "process")} - set(data)
            object.__setattr__(res, "__pydantic_fields_set__", res.model_fields_set - derived)
        return res

    def named(self, kind: str) -> str:
        """The field a message about a process's ``kind`` ("cpus" or "gpus") names: the per-trial name where the spec
        gave only that for a one-process trial (the same number there), else the per-process one."""
        per_trial, per_process = f"{kind}_per_trial", f"{kind}_per_process"
        given = self.model_fields_set
        return per_trial if self.num_processes == 1 and (per_trial in given or per_process not in given) else per_process

    @field_validator("cpus_per_trial", "gpus_per_trial")
    @classmethod
    def _shares(cls, v: float, info: ValidationInfo) -> float:
        if "num_processes" not in info.data:
            return v  # num_processes's own error is the one to read
        p = info.data["num_processes"]
        if info.field_name == "cpus_per_trial" and v > p * PROCESS_LIMITS["cpus"][1]:
            raise ValueError(f"cpus_per_trial={v:g}: allowed: more than 0 to {p * PROCESS_LIMITS['cpus'][1]:g} (256 a process)")
        if not _ray_amount(v / p):
            raise ValueError(
                f"{info.field_name}={v:g} over num_processes={p} is {v / p:.6g} a process: Ray counts CPUs and GPUs in "
                "steps of 0.0001; allowed: multiples of 0.0001 a process"
            )
        return v

    @field_validator("gpus_per_trial")
    @classmethod
    def _one_gpu_each(cls, v: float, info: ValidationInfo) -> float:
        p = info.data.get("num_processes", 1)
        if v > p:
            raise ValueError(
                f"gpus_per_trial={v:g}: each process uses one GPU at most (a trial of num_processes={p} would reserve {v:g} "
                f"and use {p}); allowed: 0 to {p} (num_processes gives a trial more processes, each with its GPU)"
            )
        return v

    @field_validator("gpus_per_process")
    @classmethod
    def _one_gpu(cls, v: float) -> float:
        if v > 1:
            raise ValueError(f"gpus_per_process={v:g}: a process uses one GPU; allowed: 0 to 1 (num_processes for more)")
        return v

    @field_validator("gpus_per_process", "cpus_per_process")
    @classmethod
    def _ray_precision(cls, v: float, info: ValidationInfo) -> float:
        if not _ray_amount(v):
            raise ValueError(f"{info.field_name}={v:.6g}: Ray counts CPUs and GPUs in steps of 0.0001; allowed: their multiples")
        return v


class AdaptiveSpec(StrictModel):
    """``mode: adaptive``: an Optuna study chooses the next (G, B) from the allowed grid until the
    95% interval of G* is narrower than ``tolerance`` x G* (with at least ``initial_points`` distinct G
    and enough replicate degrees of freedom, sweeps.adaptive) or ``max_trials`` trials were asked."""

    max_trials: int = Field(24, ge=3, le=10_000, description="trial budget of the adaptive search")
    initial_points: int = Field(
        6,
        ge=3,
        le=64,
        description="distinct G of the initial design, spread over group_sizes (4 at least; with 4 the 95% interval "
        "covered the true G* in 33 of 40 runs of bench/adaptive_vs_grid.py, with 6 in 38 of 40)",
    )
    tolerance: float = Field(0.5, gt=0, le=10, description="stop when the G* interval width <= tolerance x G*")
    parallel: int = Field(2, ge=1, le=256, description="adaptive trials in flight at once")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="seed of the sampler's tie-breaks")

    def initial_group_sizes(self, n_groups: int) -> int:
        """Distinct G of the initial design from ``n_groups`` allowed: initial_points, but at least the
        4 the law needs (sweeps.fit: 3 parameters and a residual degree of freedom)."""
        return min(max(self.initial_points, 4), n_groups)


class TuneLRSpec(StrictModel):
    """``tune_lr``: before the sweep proper, a short Optuna search of the learning rate at every
    (G, B) (log-uniform on [low, high], bad trials pruned early); the sweep's trials then use the
    best lr found for their (G, B)."""

    low: float = Field(..., gt=0, le=1000.0, description="smallest learning rate tried")
    high: float = Field(..., gt=0, le=1000.0, description="largest learning rate tried (> low)")
    trials: int = Field(8, ge=2, le=200, description="learning rates tried per (G, B)")
    steps: int | None = Field(None, ge=1, le=1_000_000, description="steps of each tuning trial (default: steps / 4)")

    @model_validator(mode="after")
    def _ordered(self) -> TuneLRSpec:
        if self.high <= self.low:
            raise ValueError(f"tune_lr.high ({self.high}) must be greater than tune_lr.low ({self.low})")
        return self
