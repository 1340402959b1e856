"""The fit's result types, as GET /v1/sweeps/{id}/fit serves them and the CLI prints them.

Values are in the metric's own units; absent values are null with a reason in ``message``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from sweeps.fit.paired import PairedComparison
from sweeps.noise import NoiseModel

FitStatus = Literal["ok", "boundary", "insufficient_data", "no_signal", "fit_failed"]
Evidence = Literal["strong", "weak", "empirical", "none"]


class BudgetFit(BaseModel):
    """The law fitted at one budget B. a, b, c refer to the minimised metric (the gap)."""

    samples_per_step: int
    status: FitStatus
    g_star: float | None = None
    a: float | None = None
    b: float | None = None
    c: float | None = None
    recommended_group_size: int | None = None
    r2: float | None = Field(None, description="weighted R^2 of the fitted curve on the means")
    chi2_per_dof: float | None = None
    points: list[dict] = Field(default_factory=list, description="{group_size, mean, se, n_seeds}")
    message: str = ""

    def in_units(self, scale: float) -> BudgetFit:
        """The same fit of the metric multiplied by ``scale`` (> 0): a, b, c and the points' mean and se scale."""
        times = lambda x: None if x is None else x * scale  # noqa: E731
        points = [{**p, "mean": p["mean"] * scale, "se": times(p["se"])} for p in self.points]
        return self.model_copy(update={"a": times(self.a), "b": times(self.b), "c": times(self.c), "points": points})


class Universality(BaseModel):
    """Shared-rho fit across budgets against one rho per budget (nested models, F-test)."""

    shared_g_star: float | None
    rho: float | None
    f_statistic: float | None
    p_value: float | None
    rejected: bool | None = Field(None, description="True when separate G* fit significantly better (p < 0.05)")
    message: str = ""


class StepFit(BaseModel):
    """The law fitted on the gap at one eval checkpoint T (eval.every; sweeps.over_time)."""

    step: int
    status: FitStatus
    g_star: float | None = None
    g_star_ci95: list[float | None] | None = None
    recommended_group_size: int | None = None
    evidence: Evidence | None = None


class TimeUniversality(BaseModel):
    """Whether G* moves with training time: the slope of log G* on log T over the checkpoints, with a
    bootstrap over whole trials (THEORY.md "Is G* universal in time?")."""

    slope: float | None = Field(None, description="d log G* / d log T at the point estimates")
    slope_ci95: list[float] | None = None
    p_value: float | None = Field(None, description="two-sided bootstrap p-value of slope = 0")
    rejected: bool | None = Field(None, description="True when G* changes with T (p < 0.05)")
    message: str = ""


class LawFit(BaseModel):
    """A fit as served by GET /v1/sweeps/{id}/fit and the CLI: absent values are null with a reason."""

    status: FitStatus
    g_star: float | None = None
    g_star_ci95: list[float | None] | None = None
    g_star_bound: dict | None = Field(None, description="{side: below|above, group_size} when boundary")
    recommended_group_size: int | None = None
    equivalent_group_sizes: list[int] = Field(
        default_factory=list, description="the G the data cannot tell from the recommended one (best in >= 2.5% of resamples)"
    )
    per_budget: list[BudgetFit] = Field(default_factory=list)
    universality: Universality | None = None
    metric: str = "gap"
    maximize: bool = False
    n_rows: int = 0
    n_dropped: int = Field(0, description="rows dropped for a non-finite metric")
    evidence: Evidence | None = Field(
        None,
        description="how far the data support the answer: strong, weak, empirical (a G measured best by a paired "
        "comparison where the law does not fit) or none (null: a fit stored before evidence was assessed)",
    )
    evidence_reason: str = ""
    comparison: PairedComparison | None = Field(
        None, description="the best G against every other, paired over seeds and budgets (when the law does not beat a constant)"
    )
    by_step: list[StepFit] = Field(default_factory=list, description="the fit at each eval checkpoint (eval.every)")
    time_universality: TimeUniversality | None = None
    noise: NoiseModel | None = Field(
        None, description="the per-seed noise model the fit weights with (sweeps.noise); null without replicated seeds"
    )
    message: str = ""
