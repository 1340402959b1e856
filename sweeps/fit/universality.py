"""One G* across budgets: the shared-rho fit, its F-test against one G* per budget, and the overall G*.

The universal law shares rho = (G* - 1)^2 across budgets: gap_k(G) = a_k + s_k * (G + rho / (G - 1)),
s_k >= 0 (THEORY.md "Is G* universal?").
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

from sweeps.fit.curve import N_PARAMS, TINY, design, g_star_of, nnls_free_intercept, slope_rss
from sweeps.fit.points import Points, unusable
from sweeps.fit.result import BudgetFit, Universality

RHO_XATOL = 1e-6  # the shared-rho search's tolerance in log rho
ALPHA = 0.05  # the F-test's level


def universality(fits: list[BudgetFit], data: dict[int, Points]) -> Universality | None:
    """The F-test of one shared rho against one rho per budget (nested models) over the fitted budgets;
    None with fewer than 2 of them."""
    usable = [f for f in fits if f.status in ("ok", "boundary")]
    if len(usable) < 2:
        return None
    arrays = [(data[f.samples_per_step].g, data[f.samples_per_step].y, data[f.samples_per_step].w) for f in usable]
    g_max = max(float(g.max()) for g, _, _ in arrays)
    rho, rss_shared = shared_rho(arrays, g_max)
    rss_sep = sum(nnls_free_intercept(design(g), y, w)[1] for g, y, w in arrays)
    n, k = sum(g.size for g, _, _ in arrays), len(arrays)
    df1, df2 = k - 1, n - N_PARAMS * k
    shared = g_star_of(1.0, rho) if math.isfinite(rho) else None  # the shape G + rho/(G-1): b = 1, c = rho
    rho_or_none = rho if math.isfinite(rho) else None
    if df2 <= 0 or rss_sep <= TINY:
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
        rejected=p < ALPHA,
        message=(
            f"separate G* per budget fit significantly better (F={f_stat:.3g}, p={p:.3g})"
            if p < ALPHA
            else f"one G* across budgets is consistent with the data (F={f_stat:.3g}, p={p:.3g})"
        ),
    )


def shared_rho(budgets: list[tuple[np.ndarray, np.ndarray, np.ndarray]], g_max: float) -> tuple[float, float]:
    """Best shared rho for gap_k = a_k + s_k (G + rho/(G-1)), s_k >= 0. Returns (rho, weighted RSS).

    budgets: one (g, y, w) per budget, each (P,); g_max: the largest G (bounds the search at (10 g_max)^2).
    rho is inf when the RSS still falls at the end of the range (no finite rho fits better).
    """

    def rss(log_rho: np.ndarray) -> np.ndarray:
        rho = np.exp(log_rho)[:, None]
        return sum((slope_rss(g + rho / (g - 1.0), y, w) for g, y, w in budgets), np.zeros(log_rho.size))

    grid = np.linspace(math.log(1e-6), math.log((10.0 * g_max) ** 2), 121)
    vals = rss(grid)
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(
        lambda v: float(rss(np.array([v]))[0]), bounds=(lo, hi), method="bounded", options={"xatol": RHO_XATOL}
    )
    best = (float(res.x), float(res.fun)) if res.fun <= vals[i] else (float(grid[i]), float(vals[i]))
    if best[0] > grid[-1] - 10 * RHO_XATOL:  # still falling at the end of the range: no finite rho fits better
        return math.inf, best[1]
    return math.exp(best[0]), best[1]


def g_star_raw(data: dict[int, Points]) -> float | None:
    """The continuous G* (inf allowed) behind the overall answer: the shared one of the usable budgets
    (shared_rho) when there are several, the one budget's own fit when there is one, None
    when none is usable. Computes only that, so the bootstrap does not fit what it does not use."""
    usable = [p for b, p in data.items() if unusable(b, p) is None]
    if len(usable) > 1:
        rho, _ = shared_rho([(p.g, p.y, p.w) for p in usable], max(float(p.g.max()) for p in usable))
        return g_star_of(1.0, rho) if math.isfinite(rho) else math.inf
    if len(usable) == 1:
        coef, _ = nnls_free_intercept(design(usable[0].g), usable[0].y, usable[0].w)
        return g_star_of(float(coef[1]), float(coef[2]), b_zero=TINY)
    return None
