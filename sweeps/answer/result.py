"""`groupscale answer`'s one typed result: what the CLI prints, the API serves, MLflow logs and the report reads.

Values are in the metric's own units; absent values are null with a reason. An interval open above is
``[lo, null]`` with ``g_star_bound = {side: above, value: lo, group_size: the grid's largest G}``: G* is at least lo.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from sweeps.fit.result import Evidence

AnswerStatus = Literal["ok", "boundary", "no_estimate"]


class Regret(BaseModel):
    """metric(group_size) - metric(versus) on the halving's law curve, with a bootstrap interval over seeds."""

    group_size: int
    versus: int | None
    value: float | None = None
    ci95: list[float] | None = None
    reason: str | None = None


class PassRate(BaseModel):
    """The pass-rate rule's inputs and pick (arXiv 2607.00152): G >= 1 / (8 eps p (1 - p))."""

    p: float | None
    epsilon: float
    group_size: int


class Baseline(BaseModel):
    """Keep the G you train with, or move: ``gain`` is metric(baseline) - metric(recommended) on the halving's law curve
    (positive: the move pays), with its interval; ``move`` only when that interval lies above 0 (THEORY.md, "Keep or
    move")."""

    group_size: int
    action: Literal["keep", "move"]
    use_group_size: int
    gain: Regret
    reason: str


class Cost(BaseModel):
    completions: int = Field(
        description="sampled completions the answer spent (under grpo.dynamic_sampling with those its steps sampled "
        "again beyond B, which the budget's plan cannot foresee)"
    )
    budget: int = Field(description="completions it was allowed")
    grid_completions: int = Field(description="completions of the full grid the spec describes")
    fraction_of_grid: float | None
    seconds: float = Field(description="the answer's wall time: every stage, set-up included")
    probe_seconds: float | None = Field(None, description="of seconds, the probe's: sampling and score vectors")
    grid_seconds: float | None = Field(
        None,
        description="the full grid's seconds at the rates the answer's own training steps ran (generation, scoring "
        "and update a sampled completion; evals at the generation rate: sweeps.answer.grid_seconds); null where no "
        "training step of groupscale's engine ran (measure gradient_mse, engine trl)",
    )
    fraction_of_grid_seconds: float | None = Field(None, description="seconds / grid_seconds")


class Bound(BaseModel):
    """A one-sided answer: G* is at least (above) or at most (below) ``value``; ``group_size`` is the grid's edge."""

    side: Literal["above", "below"]
    value: float | None
    group_size: int


class Piece(BaseModel):
    """One stage's interval for G*; ``ci95[1]`` null: open above."""

    source: str
    ci95: list[float | None]


class Answer(BaseModel):
    """A cheap answer (sweeps.answer.METHODS): which G, how sure, at what cost, and how it was measured."""

    method: str
    status: AnswerStatus
    g_star: float | None = Field(None, description="the method's point estimate of G* (at the spec's T where it follows G*)")
    g_star_ci95: list[float | None] | None = Field(None, description="[lo, hi]; hi null: open above (see g_star_bound)")
    g_star_bound: Bound | None = None
    recommended_group_size: int | None = None
    tie_set: list[int] = Field(default_factory=list, description="grid G the law picks for some G* in the interval")
    evidence: Evidence
    evidence_reason: str
    g_matters: bool | None = Field(None, description="null: not seen yet at this budget (rungs too short to tell)")
    g_matters_reason: str = ""
    regret_g8: Regret
    regret_passrate: Regret
    baseline: Baseline | None = Field(None, description="keep answer.baseline_group_size or move (null: no G recommended)")
    passrate: PassRate
    interval_pieces: list[Piece] = Field(default_factory=list)
    cost: Cost
    stages: dict[str, Any] = Field(default_factory=dict, description="plan, probe, pilot, halving, first_rung_fit: as measured")
    per_prompt: dict[str, Any] | None = Field(
        None,
        description="what per-prompt G would save at the probed policy (the probe's per_prompt: mse_ratio, mse_ratio_ci95, "
        "sgpo_mse_ratio, bucket_mse_ratio, buckets; THEORY.md 'Per-prompt G'); null without a probe",
    )
    message: str = ""
