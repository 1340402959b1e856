"""Bootstrap intervals of G*, and the group sizes the resamples cannot tell apart (THEORY.md "Evidence and units")."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from sweeps.finite import finite_or_none
from sweeps.fit.curve import N_PARAMS, design, nnls_free_intercept, recommend_group_size
from sweeps.fit.points import Points, unusable
from sweeps.fit.universality import g_star_raw

TIE_SHARE = 0.025  # a G that is best in at least this share of the resamples is listed beside the recommended one

Interval = tuple[list[float | None] | None, str, list[float]]  # (the 95% interval or None, a note, the resamples' G*)


def bootstrap_ci(data: dict[int, Points], n_boot: int, rng: np.random.Generator) -> Interval:
    """Percentile interval of G* from resampling seed deviations (trials are independent); with one seed
    per point, from the residuals (residual_bootstrap); none for identical seeds, with the reason.
    Returns (interval, note for the message, the resamples' G*).

    Each point's resampled seeds are its mean plus deviations drawn from the pool of all points'
    standardised seed deviations (y_is - mean_i) / sd_i * sqrt(n_i / (n_i - 1)), rescaled by the
    point's noise-model sd_i. With 3 seeds a point alone has only 10 distinct resamples, which makes
    a per-point bootstrap interval too narrow; pooling the deviations fixes that.

    Where the seed means scatter about the law by more than their seeds say (weighted chi^2 per degree of freedom
    above 1), every sd is scaled by the Birge ratio sqrt(chi^2 / dof) (``birge_ratio``): seeds that nearly agree
    otherwise give an interval of no width (G* in [7.29, 7.29]) while the means lie 0.01 off the curve.
    """
    sd = {b: np.sqrt(p.n) / p.w for b, p in data.items()}  # per-seed sd from the noise model (w = 1 / sqrt(var / n))
    pool = np.concatenate(
        [
            (v - v.mean()) / sd[b][i] * math.sqrt(v.size / (v.size - 1))
            for b, p in data.items()
            for i, v in enumerate(p.values)
            if v.size > 1
        ]
        or [np.array([])]
    )
    if n_boot <= 0:
        return None, "; no interval (n_boot = 0)", []
    if pool.size < 2:  # one seed per point: the residuals are the only noise estimate
        return residual_bootstrap(data, n_boot, rng)
    if np.abs(pool).max() <= 1e-9:
        return None, "; no interval: the seeds gave identical values, so there is no noise to resample", []
    inflate = birge_ratio(data)  # the deviations' scale, raised to the means' scatter about the law
    draws = []
    for _ in range(n_boot):
        boot = {
            b: p.with_values([v.mean() + inflate * sd[b][i] * rng.choice(pool, size=v.size) for i, v in enumerate(p.values)])
            for b, p in data.items()
        }
        v = g_star_raw(boot)
        if v is not None:
            draws.append(v)
    ci, note = percentile_ci(draws, n_boot)
    if ci is not None and inflate > 1.0:
        note += f"; the seeds' noise scaled by {inflate:.3g} to the means' scatter about the law (Birge ratio)"
    return ci, note, draws


def birge_ratio(data: dict[int, Points]) -> float:
    """sqrt(chi^2 / dof) of the law fitted to each usable budget's seed means with the noise model's weights, the
    budgets pooled, when above 1; else 1 (no residual degrees of freedom, or scatter within the seeds' noise).

    The scale factor by which measurements' errors are inflated when they scatter more than they claim (Birge,
    Phys. Rev. 40, 207 (1932); the Particle Data Group's scale factor S, Review of Particle Physics, Introduction)."""
    _, rss, dof = _law_residuals({b: p for b, p in data.items() if unusable(b, p) is None})
    return math.sqrt(rss / dof) if dof > 0 and rss > dof else 1.0


def _law_residuals(usable: dict[int, Points]) -> tuple[dict[int, np.ndarray], float, int]:
    """The law fitted to each budget's seed means with the noise model's weights: the fitted means per budget, the
    weighted residual sum of squares and the residual degrees of freedom, the budgets pooled."""
    fitted, rss, dof = {}, 0.0, 0
    for b, p in usable.items():
        coef, r = nnls_free_intercept(design(p.g), p.y, p.w)
        fitted[b], rss, dof = design(p.g) @ coef, rss + r, dof + p.g.size - N_PARAMS
    return fitted, rss, dof


def residual_bootstrap(data: dict[int, Points], n_boot: int, rng: np.random.Generator) -> Interval:
    """Parametric bootstrap at each usable budget's fitted curve with the pooled residual variance
    (THEORY.md "Evidence and units": with one seed per point only the residuals estimate the noise)."""
    usable = {b: p for b, p in data.items() if unusable(b, p) is None}
    fitted, rss, dof = _law_residuals(usable)
    if dof <= 0:
        return None, "; no interval: one seed per point and no residual degrees of freedom (add seeds or group sizes)", []
    sigma = math.sqrt(rss / dof)  # in weighted units: a point's noise sd is sigma / w
    draws = []
    for _ in range(n_boot):
        boot = {
            b: p.with_values(list((fitted[b] + sigma / p.w * rng.standard_normal(p.g.size))[:, None])) for b, p in usable.items()
        }
        v = g_star_raw(boot)
        if v is not None:
            draws.append(v)
    ci, note = percentile_ci(draws, n_boot)
    return ci, note + ("; from the residuals (one seed per point)" if ci is not None else ""), draws


def equivalent(draws: list[float], candidates: list[int]) -> list[int]:
    """The candidate G that are the best G (recommend_group_size) in at least TIE_SHARE of the bootstrap
    resamples: the G the data cannot tell from the recommended one."""
    if not draws:
        return []
    best = Counter(recommend_group_size(d, candidates) for d in draws)
    return sorted(g for g, k in best.items() if k >= TIE_SHARE * len(draws))


def percentile_or_inf(ascending: np.ndarray, q: float) -> float:
    """numpy's default ("linear") q-th percentile (0 <= q < 100) of ascending draws that may end in inf
    (bootstrap G* of resamples without an interior optimum): inf when the interpolation involves an inf
    draw, since a bound between a finite G* and inf is no bound (interpolating towards a large finite
    stand-in for inf gave ~1e306)."""
    pos = q / 100.0 * (ascending.size - 1)
    i = int(pos)
    frac = pos - i
    below, above = float(ascending[i]), float(ascending[min(i + 1, ascending.size - 1)])
    if frac == 0 or math.isinf(below):  # on a draw (0 x inf would be NaN), or at or past the first inf
        return below
    return below + frac * (above - below)  # inf when above is: frac > 0 and below is finite


def percentile_ci(draws: list[float], n_boot: int) -> tuple[list[float | None] | None, str]:
    """The 2.5% and 97.5% percentiles of bootstrap G* draws (inf: no interior optimum, an open end)."""
    if len(draws) < max(n_boot // 2, 1):
        return None, "; most bootstrap resamples could not be fitted"
    ascending = np.sort(np.asarray(draws, dtype=float))
    ci = [finite_or_none(percentile_or_inf(ascending, q)) for q in (2.5, 97.5)]
    note = "" if all(v is not None for v in ci) else "; the interval is open above (G* unbounded in some resamples)"
    return ci, note
