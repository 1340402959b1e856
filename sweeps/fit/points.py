"""A sweep's rows as seed-averaged points per budget, weighted by the noise model (THEORY.md "Fitting rules")."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from sweeps.fit.curve import N_PARAMS, TINY, design, nnls_free_intercept
from sweeps.noise import NoiseModel, fit_noise, replicate_stats


@dataclass(frozen=True)
class Points:
    """Seed-averaged points of one budget.

    g: (P,) group sizes; y: (P,) seed means; se: (P,) sample standard errors (nan with one seed);
    n: (P,) seeds per point; w: (P,) fit weights 1/se from the noise model; values: per-seed values;
    meas_var: (P,) mean squared measurement standard error of a seed's value (its eval's own
    sampling noise, ``gap_se``), nan where unknown.
    """

    g: np.ndarray
    y: np.ndarray
    se: np.ndarray
    n: np.ndarray
    w: np.ndarray
    values: tuple[np.ndarray, ...]
    meas_var: np.ndarray

    def with_values(self, values: list[np.ndarray]) -> Points:
        """The same points (and weights) with resampled per-seed values."""
        return replace(self, y=np.array([v.mean() for v in values]), values=tuple(values))


def aggregate_all(g: np.ndarray, b: np.ndarray, y: np.ndarray, y_se: np.ndarray) -> tuple[dict[int, Points], NoiseModel | None]:
    """Seed-averaged, noise-model-weighted points per budget, and the noise model (noise_model).

    g, b, y, y_se: (n,) one row per trial: group size, budget, metric, the metric's own standard error (nan: unknown).
    """
    budgets = [int(v) for v in np.unique(b)]
    points, noise = noise_model([_aggregate(g[b == v], y[b == v], y_se[b == v]) for v in budgets])
    return dict(zip(budgets, points)), noise


def unusable(b: int, pts: Points) -> tuple[str, str] | None:
    """(status, message) when budget ``b``'s points cannot be fitted: too few distinct G, or no signal."""
    if pts.g.size < N_PARAMS + 1:
        return "insufficient_data", f"B={b}: {pts.g.size} distinct G, the law needs at least {N_PARAMS + 1}"
    if np.ptp(pts.y) <= TINY * max(1.0, float(np.abs(pts.y).max())):
        return "no_signal", f"B={b}: the metric is the same at every G"
    return None


def _aggregate(g: np.ndarray, y: np.ndarray, y_se: np.ndarray) -> Points:
    gs = np.unique(g)
    values = tuple(y[g == v] for v in gs)
    ns = np.array([v.size for v in values])
    se = np.array([v.std(ddof=1) / math.sqrt(v.size) if v.size > 1 else np.nan for v in values])
    meas = np.array([np.nanmean(y_se[g == v] ** 2) if np.isfinite(y_se[g == v]).any() else np.nan for v in gs])
    return Points(gs.astype(float), np.array([v.mean() for v in values]), se, ns, np.ones(gs.size), values, meas)


def noise_model(points: list[Points]) -> tuple[list[Points], NoiseModel | None]:
    """Weights 1/se from a variance function fitted across all points, not from each point alone.

    With a few seeds per point, each point's own standard error is itself very noisy (2 degrees of
    freedom with 3 seeds), and weighting by it makes tests and intervals overconfident. We fit
    the noise model of sweeps.noise (log var(seed) = alpha + beta log|mean|) and weight each point by
    1 / sqrt(var_hat / n), var_hat evaluated at the law's fitted value of the point, not at its own
    mean: weighting by the observed mean rewards a point for coming out low when the variance grows
    with the mean (beta > 0), which biases G* and makes the interval miss it (bench/adaptive_vs_grid.py).
    The fitted values come from a first fit weighted at the observed means and are clipped to the
    range of the observed |means| (where the noise model was fitted); a budget the law cannot fit
    keeps its means.
    A seed's value cannot vary less than its own measurement noise (a sampled eval's ``gap_se``), so
    var_hat is at least the point's mean squared measurement error; with one seed per point that
    measurement error alone gives the weights.
    """
    y = np.concatenate([p.y for p in points])
    n = np.concatenate([p.n for p in points])
    meas = np.concatenate([p.meas_var for p in points])
    _, var, _ = replicate_stats([v for p in points for v in p.values])
    noise = fit_noise(y, var, n - 1.0)
    if noise is None:
        known = np.isfinite(meas) & (meas > TINY)
        if not known.any():
            return points, None
        return _weighted(points, np.where(known, meas, meas[known].mean())), None
    floor = lambda var: np.fmax(var, meas)  # noqa: E731 - fmax: a NaN (no measurement error known) is ignored
    first = _weighted(points, floor(noise.variance(y)))
    lo, hi = float(np.abs(y).min()), float(np.abs(y).max())
    fitted = np.clip(np.abs(np.concatenate([_fitted_means(p) for p in first])), max(lo, TINY), hi)
    return _weighted(points, floor(noise.variance(fitted))), noise


def _fitted_means(p: Points) -> np.ndarray:
    """(P,) the law's fitted values at the points of one budget (weights p.w), or the seed means where the
    budget cannot be fitted (unusable)."""
    if unusable(0, p) is not None:
        return p.y
    coef, _ = nnls_free_intercept(design(p.g), p.y, p.w)
    return design(p.g) @ coef


def _weighted(points: list[Points], model: np.ndarray) -> list[Points]:
    """The points with weights 1 / sqrt(var / n) from per-seed variances ``model`` (all points, in order)."""
    out, i = [], 0
    for p in points:
        k = p.y.size
        out.append(replace(p, w=1.0 / np.sqrt(model[i : i + k] / p.n)))
        i += k
    return out
