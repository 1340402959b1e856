"""Fitting the optimal-group-size law to sweep results.

Source: Zhou et al., "Demystifying Group Relative Policy Optimization: Its Policy Gradient is a
U-Statistic", arXiv 2603.01162 (2026); notation and fitting rules in THEORY.md. At a fixed budget
B, the final gap after T steps follows

    gap(G) = a + b * G + c / (G - 1),   b, c >= 0,   G* = 1 + sqrt(c / b)        (THEORY.md)

which is linear in (a, b, c): each budget is fitted by weighted non-negative least squares on the
basis [1, G, 1/(G-1)] (seeds averaged per point, weights 1 / the noise model's standard error, sweeps.noise). Across budgets the
universal law shares rho = (G* - 1)^2: gap_k(G) = a_k + s_k * (G + rho / (G - 1)).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field
from scipy import optimize, stats

from sweeps.finite import finite_or_none
from sweeps.noise import NoiseModel, fit_noise, replicate_stats

FitStatus = Literal["ok", "boundary", "insufficient_data", "no_signal", "fit_failed"]
Evidence = Literal["strong", "weak", "none"]
N_PARAMS = 3  # a, b, c
WEAK_R2 = 0.5  # below it the evidence is weak: the law explains little of the variation
WIDE_CI = 0.5  # an interval wider than this fraction of the grid (in log G) makes the evidence weak
TIE_SHARE = 0.025  # a G that is best in at least this share of the resamples is listed beside the recommended one
_RHO_XATOL = 1e-6  # the shared-rho search's tolerance in log rho
LAW_VS_FLAT_ALPHA = 0.05  # the law must beat a constant at this level, or the evidence is none
MAX_ABS_METRIC = 1e100  # squares of larger values overflow float64
_TINY = 1e-12


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
        description="how far the data support the answer: strong, weak or none (null: a fit stored before evidence was assessed)",
    )
    evidence_reason: str = ""
    by_step: list[StepFit] = Field(default_factory=list, description="the fit at each eval checkpoint (eval.every)")
    time_universality: TimeUniversality | None = None
    noise: NoiseModel | None = Field(
        None, description="the per-seed noise model the fit weights with (sweeps.noise); null without replicated seeds"
    )
    message: str = ""


@dataclass(frozen=True)
class _Points:
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

    def with_values(self, values: list[np.ndarray]) -> _Points:
        """The same points (and weights) with resampled per-seed values."""
        return replace(self, y=np.array([v.mean() for v in values]), values=tuple(values))


def _aggregate(g: np.ndarray, y: np.ndarray, y_se: np.ndarray) -> _Points:
    gs = np.unique(g)
    values = tuple(y[g == v] for v in gs)
    ns = np.array([v.size for v in values])
    se = np.array([v.std(ddof=1) / math.sqrt(v.size) if v.size > 1 else np.nan for v in values])
    meas = np.array([np.nanmean(y_se[g == v] ** 2) if np.isfinite(y_se[g == v]).any() else np.nan for v in gs])
    return _Points(gs.astype(float), np.array([v.mean() for v in values]), se, ns, np.ones(gs.size), values, meas)


def _noise_model(points: list[_Points]) -> tuple[list[_Points], NoiseModel | None]:
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
        known = np.isfinite(meas) & (meas > _TINY)
        if not known.any():
            return points, None
        return _weighted(points, np.where(known, meas, meas[known].mean())), None
    floor = lambda var: np.fmax(var, meas)  # noqa: E731 - fmax: a NaN (no measurement error known) is ignored
    first = _weighted(points, floor(noise.variance(y)))
    lo, hi = float(np.abs(y).min()), float(np.abs(y).max())
    fitted = np.clip(np.abs(np.concatenate([_fitted_means(p) for p in first])), max(lo, _TINY), hi)
    return _weighted(points, floor(noise.variance(fitted))), noise


def _fitted_means(p: _Points) -> np.ndarray:
    """(P,) the law's fitted values at the points of one budget (weights p.w), or the seed means where the
    budget cannot be fitted (_unusable)."""
    if _unusable(0, p) is not None:
        return p.y
    coef, _ = _nnls_free_intercept(_design(p.g), p.y, p.w)
    return _design(p.g) @ coef


def _weighted(points: list[_Points], model: np.ndarray) -> list[_Points]:
    """The points with weights 1 / sqrt(var / n) from per-seed variances ``model`` (all points, in order)."""
    out, i = [], 0
    for p in points:
        k = p.y.size
        out.append(replace(p, w=1.0 / np.sqrt(model[i : i + k] / p.n)))
        i += k
    return out


def _nnls_free_intercept(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    """Weighted least squares of y on x = [1, x1, ...] with every coefficient but the first >= 0.

    Exact: enumerates the active sets of the constrained coefficients (at most 2 here) and keeps
    the feasible solution with the smallest weighted residual sum of squares (KKT).
    Returns (coefficients, weighted RSS).
    """
    k = x.shape[1]
    xw, yw = x * w[:, None], y * w
    best, best_rss = np.zeros(k), np.inf
    for mask in range(1 << (k - 1)):
        free = [0] + [j + 1 for j in range(k - 1) if not mask >> j & 1]
        coef = np.zeros(k)
        coef[free] = np.linalg.lstsq(xw[:, free], yw, rcond=None)[0]
        if (coef[1:] < -_TINY).any():
            continue
        coef[1:] = np.maximum(coef[1:], 0.0)
        rss = float(((xw @ coef - yw) ** 2).sum())
        if rss < best_rss - _TINY:
            best, best_rss = coef, rss
    return best, best_rss


def law_curve(g: np.ndarray | float, a: float, b: float, c: float) -> np.ndarray:
    """gap(G) = a + b G + c / (G - 1) (THEORY.md). g: group sizes > 1."""
    g = np.asarray(g, dtype=float)
    return a + b * g + c / (g - 1.0)


def g_star_of(b: float, c: float) -> float:
    """G* = 1 + sqrt(c / b); inf when b = 0 (larger G always better), 1 when c = 0."""
    if b <= _TINY:
        return math.inf
    return 1.0 + math.sqrt(max(c, 0.0) / b)


def recommend_group_size(g_star: float, candidates: Sequence[int]) -> int:
    """The candidate G minimising the law's shape G + rho/(G-1), rho = (G* - 1)^2.

    Args:
        g_star: continuous optimum, >= 1 (may be inf: the largest candidate wins).
        candidates: allowed integer group sizes (>= 2), e.g. divisors of B.
    Raises:
        ValueError: no candidates.
    """
    if not candidates:
        raise ValueError("no candidate group sizes")
    if not math.isfinite(g_star):
        return max(candidates)
    rho = (g_star - 1.0) ** 2
    return min(candidates, key=lambda g: (g + rho / (g - 1.0), g))


def _divisors_in(b: int, lo: float, hi: float) -> list[int]:
    return [g for g in range(max(2, math.ceil(lo)), int(hi) + 1) if b % g == 0]


def _unusable(b: int, pts: _Points) -> tuple[str, str] | None:
    """(status, message) when budget ``b``'s points cannot be fitted: too few distinct G, or no signal."""
    if pts.g.size < N_PARAMS + 1:
        return "insufficient_data", f"B={b}: {pts.g.size} distinct G, the law needs at least {N_PARAMS + 1}"
    if np.ptp(pts.y) <= _TINY * max(1.0, float(np.abs(pts.y).max())):
        return "no_signal", f"B={b}: the metric is the same at every G"
    return None


def _design(g: np.ndarray) -> np.ndarray:
    """(n, 3) regressors [1, G, 1/(G-1)] of the law a + b G + c/(G-1)."""
    return np.stack([np.ones_like(g), g, 1.0 / (g - 1.0)], axis=1)


def _fit_budget(b: int, pts: _Points) -> BudgetFit:
    points = [
        {"group_size": int(g), "mean": float(m), "se": None if not np.isfinite(s) else float(s), "n_seeds": int(k)}
        for g, m, s, k in zip(pts.g, pts.y, pts.se, pts.n)
    ]
    base: dict[str, Any] = {"samples_per_step": b, "points": points}
    unusable = _unusable(b, pts)
    if unusable is not None:
        return BudgetFit(**base, status=unusable[0], message=unusable[1])
    w = pts.w
    coef, rss = _nnls_free_intercept(_design(pts.g), pts.y, w)
    a, bb, c = (float(v) for v in coef)
    ybar = float(np.average(pts.y, weights=w**2))
    tss = float(((pts.y - ybar) ** 2 * w**2).sum())
    dof = pts.g.size - N_PARAMS
    gs = g_star_of(bb, c)
    lo, hi = float(pts.g.min()), float(pts.g.max())
    rec = recommend_group_size(gs, _divisors_in(b, lo, hi) or [int(v) for v in pts.g])
    fit = BudgetFit(
        **base,
        status="ok",
        a=a,
        b=bb,
        c=c,
        recommended_group_size=rec,
        r2=1.0 - rss / tss if tss > _TINY else None,
        chi2_per_dof=rss / dof if dof > 0 else None,
    )
    edge = _grid_edge(gs, int(lo), int(hi))
    if edge is not None:
        fit.status = "boundary"
        fit.message = f"B={b}: " + _edge_advice(*edge)
    else:
        fit.g_star = gs
    return fit


def _slope_rss(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted RSS of y = a + s z with s >= 0 and a free, for each row of z at once (closed form).

    z: (m, n) regressors, one row per candidate; y, w: (n,) values and weights. Minimises
    sum w^2 (y - a - s z)^2: with weighted centred sums Szz, Szy, Syy, s = max(0, Szy / Szz) and
    RSS = Syy - s Szy (ordinary weighted simple regression, the slope clamped at its bound).
    Returns (m,) RSS >= 0; the same values as _nnls_free_intercept on [1, z], without its lstsq calls.
    """
    ww = w**2
    yc = y - (ww @ y) / ww.sum()
    zc = z - ((z @ ww) / ww.sum())[:, None]
    szz, szy, syy = (zc**2) @ ww, (zc * yc) @ ww, float((yc**2) @ ww)
    flat = szz <= _TINY * ((z**2) @ ww)  # z constant: no slope
    slope = np.where(flat, 0.0, np.maximum(szy, 0.0) / np.where(flat, 1.0, szz))
    return np.maximum(syy - slope * szy, 0.0)


def _shared_rho(budgets: list[tuple[np.ndarray, np.ndarray, np.ndarray]], g_max: float) -> tuple[float, float]:
    """Best shared rho for gap_k = a_k + s_k (G + rho/(G-1)), s_k >= 0. Returns (rho, weighted RSS)."""

    def rss(log_rho: np.ndarray) -> np.ndarray:
        rho = np.exp(log_rho)[:, None]
        return sum((_slope_rss(g + rho / (g - 1.0), y, w) for g, y, w in budgets), np.zeros(log_rho.size))

    grid = np.linspace(math.log(1e-6), math.log((10.0 * g_max) ** 2), 121)
    vals = rss(grid)
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(
        lambda v: float(rss(np.array([v]))[0]), bounds=(lo, hi), method="bounded", options={"xatol": _RHO_XATOL}
    )
    best = (float(res.x), float(res.fun)) if res.fun <= vals[i] else (float(grid[i]), float(vals[i]))
    if best[0] > grid[-1] - 10 * _RHO_XATOL:  # still falling at the end of the range: no finite rho fits better
        return math.inf, best[1]
    return math.exp(best[0]), best[1]


def _universality(fits: list[BudgetFit], data: dict[int, _Points]) -> Universality | None:
    usable = [f for f in fits if f.status in ("ok", "boundary")]
    if len(usable) < 2:
        return None
    arrays = [(data[f.samples_per_step].g, data[f.samples_per_step].y, data[f.samples_per_step].w) for f in usable]
    g_max = max(float(g.max()) for g, _, _ in arrays)
    rho, rss_shared = _shared_rho(arrays, g_max)
    rss_sep = sum(_nnls_free_intercept(_design(g), y, w)[1] for g, y, w in arrays)
    n, k = sum(g.size for g, _, _ in arrays), len(arrays)
    df1, df2 = k - 1, n - N_PARAMS * k
    shared = 1.0 + math.sqrt(rho) if math.isfinite(rho) else None
    rho_or_none = rho if math.isfinite(rho) else None
    if df2 <= 0 or rss_sep <= _TINY:
        return Universality(
            shared_g_star=shared,
            rho=rho_or_none,
            f_statistic=None,
            p_value=None,
            message="too few points per budget for the F-test",
        )
    f_stat = max(0.0, (rss_shared - rss_sep) / df1) / (rss_sep / df2)
    p = float(stats.f.sf(f_stat, df1, df2))
    return Universality(
        shared_g_star=shared,
        rho=rho_or_none,
        f_statistic=f_stat,
        p_value=p,
        rejected=p < 0.05,
        message=(
            f"separate G* per budget fit significantly better (F={f_stat:.3g}, p={p:.3g})"
            if p < 0.05
            else f"one G* across budgets is consistent with the data (F={f_stat:.3g}, p={p:.3g})"
        ),
    )


def _aggregate_all(g: np.ndarray, b: np.ndarray, y: np.ndarray, y_se: np.ndarray) -> tuple[dict[int, _Points], NoiseModel | None]:
    """Seed-averaged, noise-model-weighted points per budget, and the noise model (_noise_model)."""
    budgets = [int(v) for v in np.unique(b)]
    points, noise = _noise_model([_aggregate(g[b == v], y[b == v], y_se[b == v]) for v in budgets])
    return dict(zip(budgets, points)), noise


def _point_estimate(data: dict[int, _Points]) -> tuple[list[BudgetFit], Universality | None]:
    fits = [_fit_budget(k, p) for k, p in data.items()]
    return fits, _universality(fits, data)


def _g_star_raw(data: dict[int, _Points]) -> float | None:
    """The continuous G* (inf allowed) behind the overall answer: the shared one of the usable budgets
    (_universality's rho) when there are several, the one budget's own fit when there is one, None
    when none is usable. Computes only that, so the bootstrap does not fit what it does not use."""
    usable = [p for b, p in data.items() if _unusable(b, p) is None]
    if len(usable) > 1:
        rho, _ = _shared_rho([(p.g, p.y, p.w) for p in usable], max(float(p.g.max()) for p in usable))
        return 1.0 + math.sqrt(rho) if math.isfinite(rho) else math.inf
    if len(usable) == 1:
        coef, _ = _nnls_free_intercept(_design(usable[0].g), usable[0].y, usable[0].w)
        return g_star_of(float(coef[1]), float(coef[2]))
    return None


def _bootstrap_ci(
    data: dict[int, _Points], n_boot: int, rng: np.random.Generator
) -> tuple[list[float | None] | None, str, list[float]]:
    """Percentile interval of G* from resampling seed deviations (trials are independent); with one seed
    per point, from the residuals (_residual_bootstrap); none for identical seeds, with the reason.
    Returns (interval, note for the message, the resamples' G*).

    Each point's resampled seeds are its mean plus deviations drawn from the pool of all points'
    standardised seed deviations (y_is - mean_i) / sd_i * sqrt(n_i / (n_i - 1)), rescaled by the
    point's noise-model sd_i. With 3 seeds a point alone has only 10 distinct resamples, which makes
    a per-point bootstrap interval too narrow; pooling the deviations fixes that.
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
        return _residual_bootstrap(data, n_boot, rng)
    if np.abs(pool).max() <= 1e-9:
        return None, "; no interval: the seeds gave identical values, so there is no noise to resample", []
    draws = []
    for _ in range(n_boot):
        boot = {
            b: p.with_values([v.mean() + sd[b][i] * rng.choice(pool, size=v.size) for i, v in enumerate(p.values)])
            for b, p in data.items()
        }
        v = _g_star_raw(boot)
        if v is not None:
            draws.append(v)
    return (*_percentile_ci(draws, n_boot), draws)


def _residual_bootstrap(
    data: dict[int, _Points], n_boot: int, rng: np.random.Generator
) -> tuple[list[float | None] | None, str, list[float]]:
    """Parametric bootstrap at each usable budget's fitted curve with the pooled residual variance
    (THEORY.md "Evidence and units": with one seed per point only the residuals estimate the noise)."""
    usable = {b: p for b, p in data.items() if _unusable(b, p) is None}
    fitted, rss, dof = {}, 0.0, 0
    for b, p in usable.items():
        coef, r = _nnls_free_intercept(_design(p.g), p.y, p.w)
        fitted[b], rss, dof = _design(p.g) @ coef, rss + r, dof + p.g.size - N_PARAMS
    if dof <= 0:
        return None, "; no interval: one seed per point and no residual degrees of freedom (add seeds or group sizes)", []
    sigma = math.sqrt(rss / dof)  # in weighted units: a point's noise sd is sigma / w
    draws = []
    for _ in range(n_boot):
        boot = {
            b: p.with_values(list((fitted[b] + sigma / p.w * rng.standard_normal(p.g.size))[:, None])) for b, p in usable.items()
        }
        v = _g_star_raw(boot)
        if v is not None:
            draws.append(v)
    ci, note = _percentile_ci(draws, n_boot)
    return ci, note + ("; from the residuals (one seed per point)" if ci is not None else ""), draws


def _equivalent(draws: list[float], candidates: list[int]) -> list[int]:
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


def _percentile_ci(draws: list[float], n_boot: int) -> tuple[list[float | None] | None, str]:
    """The 2.5% and 97.5% percentiles of bootstrap G* draws (inf: no interior optimum, an open end)."""
    if len(draws) < max(n_boot // 2, 1):
        return None, "; most bootstrap resamples could not be fitted"
    ascending = np.sort(np.asarray(draws, dtype=float))
    ci = [finite_or_none(percentile_or_inf(ascending, q)) for q in (2.5, 97.5)]
    note = "" if all(v is not None for v in ci) else "; the interval is open above (G* unbounded in some resamples)"
    return ci, note


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
        return LawFit(
            status="insufficient_data",
            message="no usable rows" + dropped,
            evidence="none",
            evidence_reason="no usable rows",
            **head,
        )
    if np.abs(v).max() > MAX_ABS_METRIC:
        msg = f"|{metric}| exceeds {MAX_ABS_METRIC:g}: rescale it"
        return LawFit(status="fit_failed", message=msg + dropped, evidence="none", evidence_reason=msg, **head)
    scale = float(np.abs(v).max()) or 1.0  # fitted in units of the largest |metric|: no threshold depends on units
    try:
        data, noise = _aggregate_all(g, b, v / scale, se / scale)
        out = _fit(data, head, dropped, n_boot, random_state)
        out.noise = noise
    except (ValueError, np.linalg.LinAlgError, FloatingPointError) as e:  # pragma: no cover - defensive
        return LawFit(
            status="fit_failed",
            message=f"{type(e).__name__}: {e}" + dropped,
            evidence="none",
            evidence_reason="the fit failed",
            **head,
        )
    return _finite(_in_units(out, scale))


def _fit(data: dict[int, _Points], head: dict[str, Any], dropped: str, n_boot: int, random_state: int) -> LawFit:
    """fit_law on aggregated points of a metric in units of its largest |value|."""
    fits, uni = _point_estimate(data)
    statuses = {f.status for f in fits}
    if statuses <= {"no_signal"}:
        reason = f"{head['metric']} is the same at every G"
        return LawFit(
            status="no_signal", per_budget=fits, message=reason + dropped, evidence="none", evidence_reason=reason, **head
        )
    if not statuses & {"ok", "boundary"}:
        msgs = "; ".join(f.message for f in fits)
        return LawFit(
            status="insufficient_data", per_budget=fits, message=msgs + dropped, evidence="none", evidence_reason=msgs, **head
        )
    raw = _g_star_raw(data)
    usable = [f for f in fits if f.status in ("ok", "boundary")]
    lo = min(p["group_size"] for f in usable for p in f.points)
    hi = max(p["group_size"] for f in usable for p in f.points)
    budgets = [f.samples_per_step for f in usable]
    common = [k for k in range(lo, hi + 1) if all(bb % k == 0 for bb in budgets)]
    if raw is None:  # several budgets without a shared fit cannot happen; guard anyway
        return LawFit(
            status="fit_failed",
            per_budget=fits,
            message="no overall G*",
            evidence="none",
            evidence_reason="no overall G*",
            **head,
        )
    rec = recommend_group_size(raw, common or list(range(lo, hi + 1)))
    out = LawFit(status="ok", per_budget=fits, universality=uni, recommended_group_size=rec, **head)
    edge = _grid_edge(raw, lo, hi)
    if edge is not None:
        out.status = "boundary"
        out.g_star_bound = {"side": edge[0], "group_size": edge[1]}
        out.message = _edge_advice(*edge)
    else:
        out.g_star = raw
        ci, note, draws = _bootstrap_ci(data, n_boot, np.random.default_rng(random_state))
        out.g_star_ci95 = ci
        out.message = f"G* = {raw:.3g}; use G = {rec}" + (note or "")
        candidates = common or list(range(lo, hi + 1))
        out.equivalent_group_sizes = _equivalent(draws, candidates) or [rec]
        if len(out.equivalent_group_sizes) > 1:
            listed = ", ".join(map(str, out.equivalent_group_sizes))
            out.message += (
                f"; G = {listed} are indistinguishable here (each is the best G in >= {TIE_SHARE:.1%} of the resamples)"
            )
    out.evidence, out.evidence_reason = _evidence(data, usable, out.g_star_ci95, lo, hi, edge is not None)
    if out.evidence == "none":
        out.recommended_group_size, out.equivalent_group_sizes = None, []
        out.message = f"no recommendation: {out.evidence_reason}"
    elif out.evidence == "weak":
        out.message += f"; weak evidence: {out.evidence_reason}"
    out.message += dropped
    return out


def _law_vs_flat(data: dict[int, _Points]) -> tuple[float, float] | None:
    """F-test of the law (a + b G + c/(G-1) per budget) against a constant per budget on the seed
    means with the noise model's weights (THEORY.md "Evidence and units"). Returns (F, p), or None
    when the law leaves no residual degrees of freedom."""
    usable = [p for b, p in data.items() if _unusable(b, p) is None]
    n, k = sum(p.g.size for p in usable), len(usable)
    df1, df2 = (N_PARAMS - 1) * k, n - N_PARAMS * k
    if df2 <= 0:
        return None
    rss_law = sum(_nnls_free_intercept(_design(p.g), p.y, p.w)[1] for p in usable)
    rss_flat = sum(float((p.w**2 * (p.y - np.average(p.y, weights=p.w**2)) ** 2).sum()) for p in usable)
    if rss_law <= _TINY * rss_flat:  # the law is exact: no noise left to compare with
        return math.inf, 0.0
    f_stat = max(0.0, (rss_flat - rss_law) / df1) / (rss_law / df2)
    return f_stat, float(stats.f.sf(f_stat, df1, df2))


def _evidence(
    data: dict[int, _Points], usable: list[BudgetFit], ci: list[float | None] | None, lo: int, hi: int, boundary: bool
) -> tuple[Evidence, str]:
    """(strong | weak | none, why), by THEORY.md's rules: none when the law does not beat a constant;
    weak when R^2 < WEAK_R2 at a budget, or the interval is missing, open or wider than WIDE_CI of
    the grid in log G; strong otherwise."""
    test = _law_vs_flat(data)
    if test is None:
        need = f"need at least {N_PARAMS + 1} distinct G at a budget"
        return "none", f"too few group sizes per budget to test the law against a constant ({need})"
    f_stat, p = test
    stat = "F = inf" if math.isinf(f_stat) else f"F = {f_stat:.3g}, p = {p:.2g}"
    if p >= LAW_VS_FLAT_ALPHA:
        return (
            "none",
            f"the law does not fit better than a constant ({stat}): G may not matter here, or noise hides it; add seeds or steps",
        )
    weak = [f"R2 = {f.r2:.2f} at B = {f.samples_per_step}" for f in usable if f.r2 is not None and f.r2 < WEAK_R2]
    if boundary:
        weak.append("G* lies at the edge of the grid, so it has no interval")
    elif ci is None:
        weak.append("G* has no interval")
    elif ci[0] is None or ci[1] is None:
        weak.append("the interval of G* is open")
    elif math.log(ci[1] / ci[0]) > WIDE_CI * math.log(hi / lo):
        weak.append(f"the interval of G* [{ci[0]:.3g}, {ci[1]:.3g}] spans more than half the grid (in log G)")
    if weak:
        return "weak", "; ".join(weak)
    return "strong", f"the law beats a constant ({stat}), explains most of the variation and pins G* within the grid"


def _in_units(fit: LawFit, scale: float) -> LawFit:
    """The fit's values in the metric's own units (the fit ran on metric / scale)."""
    fit.noise = None if fit.noise is None else fit.noise.in_units(scale)
    for f in fit.per_budget:
        f.a, f.b, f.c = (None if x is None else x * scale for x in (f.a, f.b, f.c))
        for point in f.points:
            point["mean"] *= scale
            point["se"] = None if point["se"] is None else point["se"] * scale
    return fit


def _grid_edge(g_star: float, lo: int, hi: int) -> tuple[str, int] | None:
    """("below", lo) or ("above", hi) when G* is at or beyond an edge of the grid, else None."""
    if g_star <= lo:
        return "below", lo
    if g_star >= hi:
        return "above", hi
    return None


def _edge_advice(side: str, edge: int) -> str:
    if side == "below" and edge <= 2:
        return (
            "G* is at or below 2, the smallest group size: use G = 2 (the fit finds no interior optimum, "
            "so smaller groups and more prompts win throughout the grid)"
        )
    return f"G* is at or {side} the edge of the grid ({edge}); extend group_sizes {side} {edge} before trusting a recommendation"


def _finite(fit: LawFit) -> LawFit:
    """Guard: a fit with NaN or infinity anywhere (overflowing inputs) becomes fit_failed."""
    dump = fit.model_dump()
    if finite_or_none(dump) != dump:  # NaN never equals itself, and inf becomes None
        msg = "the fit overflowed: rescale the metric (values are too large)"
        return LawFit(
            status="fit_failed",
            metric=fit.metric,
            maximize=fit.maximize,
            n_rows=fit.n_rows,
            n_dropped=fit.n_dropped,
            message=msg,
            evidence="none",
            evidence_reason=msg,
        )
    return fit
