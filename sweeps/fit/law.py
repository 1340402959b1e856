"""fit_law: a sweep's rows in, one LawFit out (per-budget fits, one G*, its interval, evidence), built once.

Each budget is fitted by weighted non-negative least squares (sweeps.fit.budget) on seed means weighted
by the noise model (sweeps.fit.points); several budgets share one G* (sweeps.fit.universality); the
interval is a bootstrap over seeds (sweeps.fit.bootstrap); the evidence follows THEORY.md's rules
(sweeps.fit.evidence). The fit runs on the metric divided by its largest |value|, so that no threshold
depends on the metric's units, and the result is stated in the metric's units.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sweeps.finite import finite_or_none
from sweeps.fit.bootstrap import TIE_SHARE, bootstrap_ci, equivalent
from sweeps.fit.budget import edge_advice, fit_budget, grid_edge
from sweeps.fit.curve import recommend_group_size
from sweeps.fit.evidence import assess
from sweeps.fit.paired import PairedComparison, compare_best
from sweeps.fit.points import Points, aggregate_all
from sweeps.fit.result import LawFit
from sweeps.fit.universality import g_star_raw, universality

MAX_ABS_METRIC = 1e100  # squares of larger values overflow float64


def fit_law(
    group_size: Sequence[int],
    samples_per_step: Sequence[int],
    seed: Sequence[int],
    y: Sequence[float],
    *,
    metric: str = "gap",
    maximize: bool = False,
    n_boot: int = 200,
    random_state: int = 0,
    y_se: Sequence[float | None] | None = None,
) -> LawFit:
    """Fit the law to one row per trial.

    Args:
        group_size, samples_per_step, seed: (n,) ints, one row per trial.
        y: (n,) float metric; lower is better unless ``maximize`` (then -y is fitted).
            Non-finite rows are dropped and counted in ``n_dropped``.
        n_boot: bootstrap resamples for ``g_star_ci95`` (over seeds; over residuals with one seed per point).
        y_se: (n,) standard error of each row's own measurement (a sampled eval's ``gap_se``; None or
            NaN where unknown), used by the noise model as a floor on the seed variance.
    Returns:
        LawFit; never raises for bad data and never holds NaN or inf (absent values are None).
    """
    g = np.asarray(group_size, dtype=float)
    b = np.asarray(samples_per_step, dtype=int)
    s = np.asarray(seed, dtype=int)
    v = np.asarray(y, dtype=float) * (-1.0 if maximize else 1.0)
    se = np.full(g.size, np.nan) if y_se is None else np.array([np.nan if x is None else float(x) for x in y_se])
    keep = np.isfinite(v)
    head: dict[str, Any] = {"metric": metric, "maximize": maximize, "n_rows": int(g.size), "n_dropped": int((~keep).sum())}
    g, b, s, v, se = g[keep], b[keep], s[keep], v[keep], se[keep]
    dropped = f" ({head['n_dropped']} rows with a non-finite {metric} dropped)" if head["n_dropped"] else ""
    if g.size == 0:
        return _failed(head, "insufficient_data", "no usable rows" + dropped, reason="no usable rows")
    if np.abs(v).max() > MAX_ABS_METRIC:
        msg = f"|{metric}| exceeds {MAX_ABS_METRIC:g}: rescale it"
        return _failed(head, "fit_failed", msg + dropped, reason=msg)
    scale = float(np.abs(v).max()) or 1.0  # fitted in units of the largest |metric|: no threshold depends on units
    try:
        data, noise = aggregate_all(g, b, v / scale, se / scale)
        parts = _fit(data, metric, n_boot, random_state)
        if parts["evidence"] == "none" and parts["status"] in ("ok", "boundary"):
            parts.update(_empirical(parts, compare_best(g, b, s, v)))
    except (ValueError, np.linalg.LinAlgError, FloatingPointError) as e:  # pragma: no cover - defensive
        return _failed(head, "fit_failed", f"{type(e).__name__}: {e}" + dropped, reason="the fit failed")
    parts["per_budget"] = [f.in_units(scale) for f in parts["per_budget"]]
    parts["message"] += dropped
    return _finite(LawFit(**head, **parts, noise=None if noise is None else noise.in_units(scale)))


def _fit(data: dict[int, Points], metric: str, n_boot: int, random_state: int) -> dict[str, Any]:
    """LawFit's fields from aggregated points of a metric in units of its largest |value|."""
    fits = [fit_budget(k, p) for k, p in data.items()]
    statuses = {f.status for f in fits}
    if statuses <= {"no_signal"}:
        return _no_answer("no_signal", f"{metric} is the same at every G", per_budget=fits)
    if not statuses & {"ok", "boundary"}:
        return _no_answer("insufficient_data", "; ".join(f.message for f in fits), per_budget=fits)
    raw = g_star_raw(data)
    if raw is None:  # several budgets without a shared fit cannot happen; guard anyway
        return _no_answer("fit_failed", "no overall G*", per_budget=fits)
    usable = [f for f in fits if f.status in ("ok", "boundary")]
    lo = min(p["group_size"] for f in usable for p in f.points)
    hi = max(p["group_size"] for f in usable for p in f.points)
    budgets = [f.samples_per_step for f in usable]
    candidates = [k for k in range(lo, hi + 1) if all(bb % k == 0 for bb in budgets)] or list(range(lo, hi + 1))
    best = recommend_group_size(raw, candidates)
    edge = grid_edge(raw, lo, hi)
    if edge is None:
        ci, note, draws = bootstrap_ci(data, n_boot, np.random.default_rng(random_state))
        ties = equivalent(draws, candidates) or [best]
        message = f"G* = {raw:.3g}; use G = {best}" + (note or "") + _ties_note(ties)
    else:
        ci, ties, message = None, [], edge_advice(*edge)
    evidence, reason = assess(data, usable, ci, lo, hi, edge is not None)
    rec: int | None = best
    if evidence == "none":
        rec, ties, message = None, [], f"no recommendation: {reason}"
    elif evidence == "weak":
        message += f"; weak evidence: {reason}"
    return {
        "status": "ok" if edge is None else "boundary",
        "g_star": raw if edge is None else None,
        "g_star_ci95": ci,
        "g_star_bound": None if edge is None else {"side": edge[0], "group_size": edge[1]},
        "recommended_group_size": rec,
        "equivalent_group_sizes": ties,
        "per_budget": fits,
        "universality": universality(fits, data),
        "evidence": evidence,
        "evidence_reason": reason,
        "message": message,
    }


def _empirical(parts: dict[str, Any], comparison: PairedComparison | None) -> dict[str, Any]:
    """When the law does not beat a constant but one G is best by more than the seed noise (sweeps.fit.paired):
    that G, with evidence ``empirical``; otherwise only the comparison, beside evidence none."""
    if comparison is None or not comparison.significant:
        return {"comparison": comparison}
    why = f"{parts['evidence_reason']}; but one G beats every other in paired comparisons (comparison)"
    return {
        "comparison": comparison,
        "evidence": "empirical",
        "evidence_reason": why,
        "recommended_group_size": comparison.best,
        "equivalent_group_sizes": [comparison.best],
        "message": comparison.message,
    }


def _ties_note(ties: list[int]) -> str:
    if len(ties) < 2:
        return ""
    listed = ", ".join(map(str, ties))
    return f"; G = {listed} are indistinguishable here (each is the best G in >= {TIE_SHARE:.1%} of the resamples)"


def _no_answer(status: str, reason: str, **fields: Any) -> dict[str, Any]:
    """LawFit's fields of a fit without an answer: evidence none, the reason as the message."""
    return {"status": status, "message": reason, "evidence": "none", "evidence_reason": reason, **fields}


def _failed(head: dict[str, Any], status: str, message: str, *, reason: str) -> LawFit:
    """A fit without an answer for rows that cannot be fitted (evidence none)."""
    return LawFit(**head, status=status, message=message, evidence="none", evidence_reason=reason)


def _finite(fit: LawFit) -> LawFit:
    """Guard: a fit with NaN or infinity anywhere (overflowing inputs) becomes fit_failed."""
    dump = fit.model_dump()
    if finite_or_none(dump) != dump:  # NaN never equals itself, and inf becomes None
        msg = "the fit overflowed: rescale the metric (values are too large)"
        head = {k: getattr(fit, k) for k in ("metric", "maximize", "n_rows", "n_dropped")}
        return _failed(head, "fit_failed", msg, reason=msg)
    return fit
