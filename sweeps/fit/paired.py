"""Is one G best by more than the seed noise? A paired comparison over seeds and budgets, for when the law does not fit.

The law's F-test (sweeps.fit.evidence) asks whether a + b G + c/(G-1) beats a constant; a table can fail it and
still have one G clearly lowest (a kink the law's smooth shape cannot follow). Trials that share a seed and a
budget share their data order and evaluation prompts, so they are compared in pairs: for the G with the lowest
mean, each other G's paired differences d = y(G) - y(best) over the (B, seed) cells both have are tested with a
one-sided paired t-test (H1: mean d > 0), and the p-values are adjusted for the k - 1 comparisons by Holm's
step-down method (Holm 1979, Scand. J. Statist. 6:65-70). G is best when every adjusted p < ALPHA; its effect
size is the smallest Cohen's d_z = mean(d) / sd(d) over the comparisons, its margin the smallest mean(d).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from pydantic import BaseModel, Field
from scipy import stats

ALPHA = 0.05
MIN_PAIRS = 2  # a paired t-test needs n - 1 >= 1 degree of freedom (with 1, only a very consistent margin passes)


class PairedComparison(BaseModel):
    """The best G against every other G, paired over (B, seed); values in the metric's units (lower is better)."""

    best: int
    runner_up: int = Field(description="the G whose comparison with the best is weakest (largest adjusted p)")
    margin: float = Field(description="smallest mean paired difference y(G) - y(best), in the metric's units")
    effect_size: float | None = Field(description="smallest Cohen's d_z = mean(d) / sd(d); null when sd(d) = 0")
    p_value: float = Field(description="largest Holm-adjusted one-sided p over the comparisons")
    n_pairs: int = Field(description="fewest (B, seed) pairs in a comparison")
    significant: bool
    message: str = ""


def compare_best(
    group_size: np.ndarray, samples_per_step: np.ndarray, seed: np.ndarray, y: np.ndarray
) -> PairedComparison | None:
    """The paired comparison above on one row per trial (lower y is better).

    Args:
        group_size, samples_per_step, seed: (n,) one row per trial; y: (n,) finite metric.
    Returns:
        PairedComparison, or None with fewer than 2 G or fewer than MIN_PAIRS pairs in some comparison.
    """
    cell: dict[int, dict[tuple[int, int], float]] = defaultdict(dict)
    for g, b, s, v in zip(group_size, samples_per_step, seed, y, strict=True):
        cell[int(g)][(int(b), int(s))] = float(v)
    if len(cell) < 2:
        return None
    best = min(cell, key=lambda g: float(np.mean(list(cell[g].values()))))
    tests = []  # (p, G, mean d, d_z, n)
    for g in sorted(cell):
        if g == best:
            continue
        keys = sorted(cell[g].keys() & cell[best].keys())
        if len(keys) < MIN_PAIRS:
            return None
        d = np.array([cell[g][k] - cell[best][k] for k in keys])
        sd = float(d.std(ddof=1))
        if sd == 0.0:
            p = 0.0 if d.mean() > 0 else 1.0
        else:
            p = float(stats.t.sf(d.mean() / (sd / math.sqrt(d.size)), d.size - 1))
        tests.append((p, g, float(d.mean()), None if sd == 0.0 else float(d.mean()) / sd, d.size))
    m = len(tests)
    adjusted, running = {}, 0.0
    for i, (p, g, *_) in enumerate(sorted(tests)):  # Holm: the i-th smallest p times (m - i), kept monotone
        running = max(running, min(1.0, (m - i) * p))
        adjusted[g] = running
    weakest = max(tests, key=lambda t: (adjusted[t[1]], -t[2]))
    sizes = [t[3] for t in tests if t[3] is not None]
    significant = all(a < ALPHA for a in adjusted.values())
    p_max = max(adjusted.values())
    return PairedComparison(
        best=best,
        runner_up=weakest[1],
        margin=min(t[2] for t in tests),
        effect_size=min(sizes) if sizes else None,
        p_value=p_max,
        n_pairs=min(t[4] for t in tests),
        significant=significant,
        message=(
            f"G = {best} beats every other G in paired comparisons matched by seed and budget (Holm-adjusted p <= {p_max:.2g})"
            if significant
            else f"G = {best} has the lowest mean but is not shown better than G = {weakest[1]} (Holm-adjusted p = {p_max:.2g})"
        ),
    )
