"""Whether G matters at the halving's first rung: its F-test says yes, a bound on the spread across G says no.

THEORY.md, "When G barely matters". On the law curve fitted to the first rung (G, B, seed, metric rows; sweeps.fit):

- ``False`` ("G barely matters", a claim of size, so it stands even where the F-test finds the small spread real): the
  rung reached MATTERS_MIN_SHARE of the spec's T (``gradient_mse``: of its draws)
  and the 95% upper bound U of the curve's spread over the grid, max_G curve - min_G curve, is at most MATTERS_SHARE
  of the metric's scale s. U = max_G hi(D_G) + max(0, max_G -lo(D_G)) with D_G = curve(G) - curve(r) for the rung's
  best G r and [lo, hi] the regrets' 95% intervals (sweeps.answer.rivals): the spread is (max curve - curve(r)) +
  (curve(r) - min curve), each bounded by one G's interval end at 97.5%, so U holds it at 95% (a union bound). s is
  how far the rung's training moved the metric, |mean at the rung - mean at step 0| (the trials' ``<metric>_initial``),
  or for ``gradient_mse``, which starts nowhere, the MSE's own level |mean at the rung|.
- ``True``: not False, and the F-test of the law against a constant on seed means shows G mattering (sweeps.fit
  evidence).
- ``None`` otherwise, with the reason: the rung was too short, training did not move the metric, or the data bound the
  spread no tighter than the claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sweeps.answer.plan import AnswerPlan
from sweeps.answer.rivals import regrets
from sweeps.fit import LawFit
from sweeps.spec import SweepSpec

MATTERS_MIN_SHARE = 0.25  # a rung shorter than this share of the spec's T (or draws) cannot say "G barely matters"
MATTERS_SHARE = 0.1  # "G barely matters": the grid's spread at most this share of the metric's scale


def spread_bound(rows: Sequence[tuple[int, int, int, float]], group_sizes: Sequence[int], best: int, metric: str) -> float | None:
    """U, the 95% upper bound of max_G curve(G) - min_G curve(G) over ``group_sizes`` (module docstring), in the
    metric's units; None when the regrets have no interval (no law fitted, too few resamples)."""
    ends = [r.ci95 for r in regrets(rows, group_sizes, best, metric) if r.ci95 is not None]
    if len(ends) < len(group_sizes):
        return None
    return max(ci[1] for ci in ends) + max(0.0, max(-ci[0] for ci in ends))


def metric_scale(rows: Sequence[tuple[int, int, int, float]], initial: float | None) -> float:
    """s: |mean metric at the rung - ``initial``| (its mean at step 0), or |mean metric at the rung| without one."""
    level = float(np.mean([r[3] for r in rows]))
    return abs(level - initial) if initial is not None else abs(level)


def whether_g_matters(
    first_fit: LawFit | None, spec: SweepSpec, plan: AnswerPlan, halving: dict | None
) -> tuple[bool | None, str]:
    """(True | False | None, the reason in words that say how long the rung was against the spec); module docstring.
    ``halving``: the stage's result, {rows, initial (the metric's mean at step 0 or None), ...}."""
    metric = spec.measure.metric
    if first_fit is None or plan.halving is None or not halving:
        return None, "whether G matters was not measured at this budget (no training sweep fitted in it)"
    unit, full = ("steps", spec.steps) if plan.halving.resume else ("draws", spec.measure.repeats)
    length = plan.halving.lengths[0]
    at = f"after {length} of the spec's {full} {unit}"
    shown = f"G matters here: {metric} varies across G more than across seeds {at}"
    if length < MATTERS_MIN_SHARE * full:
        if first_fit.evidence != "none":
            return True, shown
        need = math.ceil(MATTERS_MIN_SHARE * full)
        return None, (
            f"whether G matters is not seen yet at this budget: {length} of the spec's {full} {unit} show no difference "
            f"beyond the seed noise, and it takes at least {need} {unit} ({MATTERS_MIN_SHARE:.0%}) to say it barely matters"
        )
    rows, grid = halving["rows"], sorted({r[0] for r in halving["rows"]})
    best = first_fit.recommended_group_size or halving.get("best") or grid[len(grid) // 2]  # any G bounds the spread
    bound, scale = spread_bound(rows, grid, best, metric), metric_scale(rows, halving.get("initial"))
    moved = halving.get("initial") is not None
    limit = f"{MATTERS_SHARE * scale:.3g} ({MATTERS_SHARE:.0%} of {'how far training moved ' if moved else ''}{metric}"
    limit += ")" if moved else "'s level)"
    if bound is not None and scale > 0 and bound <= MATTERS_SHARE * scale:
        return False, (
            f"G barely matters here: every G from {grid[0]} to {grid[-1]} is within {bound:.3g} of the best (95% bound) "
            f"{at}, at most {limit}"
        )
    if first_fit.evidence != "none":
        return True, shown
    if scale <= 0:
        return None, f"whether G matters could not be told at this budget: training did not move {metric} {at}"
    said = "could not bound it" if bound is None else f"bound it at {bound:.3g} (95%)"
    return None, (
        f"whether G matters could not be told at this budget: the spread of {metric} across G is within the seed noise "
        f"{at}, but the data {said}, more than {limit}"
    )
