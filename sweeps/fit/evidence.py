"""How strongly the data support the answer: strong, weak or none, with the reason (THEORY.md "Evidence and units")."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from sweeps.fit.curve import N_PARAMS, TINY, design, nnls_free_intercept
from sweeps.fit.points import Points, unusable
from sweeps.fit.result import BudgetFit, Evidence

WEAK_R2 = 0.5  # below it the evidence is weak: the law explains little of the variation
WIDE_CI = 0.5  # an interval wider than this fraction of the grid (in log G) makes the evidence weak
LAW_VS_FLAT_ALPHA = 0.05  # the law must beat a constant at this level, or the evidence is none


def assess(
    data: dict[int, Points], usable: list[BudgetFit], ci: list[float | None] | None, lo: int, hi: int, boundary: bool
) -> tuple[Evidence, str]:
    """(strong | weak | none, why), by THEORY.md's rules: none when the law does not beat a constant;
    weak when R^2 < WEAK_R2 at a budget, or the interval is missing, open or wider than WIDE_CI of
    the grid [lo, hi] in log G; strong otherwise."""
    test = law_vs_flat(data)
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


def law_vs_flat(data: dict[int, Points]) -> tuple[float, float] | None:
    """F-test of the law (a + b G + c/(G-1) per budget) against a constant per budget on the seed
    means with the noise model's weights (THEORY.md "Evidence and units"). Returns (F, p), or None
    when the law leaves no residual degrees of freedom."""
    usable = [p for b, p in data.items() if unusable(b, p) is None]
    n, k = sum(p.g.size for p in usable), len(usable)
    df1, df2 = (N_PARAMS - 1) * k, n - N_PARAMS * k
    if df2 <= 0:
        return None
    rss_law = sum(nnls_free_intercept(design(p.g), p.y, p.w)[1] for p in usable)
    rss_flat = sum(float((p.w**2 * (p.y - np.average(p.y, weights=p.w**2)) ** 2).sum()) for p in usable)
    if rss_law <= TINY * rss_flat:  # the law is exact: no noise left to compare with
        return math.inf, 0.0
    f_stat = max(0.0, (rss_flat - rss_law) / df1) / (rss_law / df2)
    return f_stat, float(stats.f.sf(f_stat, df1, df2))
