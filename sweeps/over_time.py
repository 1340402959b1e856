"""G* over training time: the law fitted at each eval checkpoint T, and a test of whether G* moves with T.

THEORY.md "Is G* universal in time?": the law says G* does not depend on the number of steps T;
IsoCompute (arXiv 2603.12151) finds the best rollouts per problem growing with steps. Every trial
is evaluated at the same checkpoints (eval.every, same held-out set and eval seed), the law is
fitted at each, and the slope of log G* on log T over the checkpoints whose fit gives a finite G* is
tested with a bootstrap that resamples whole trials (a trial's checkpoints are one run, so they are not
independent) within each (G, B) cell; with a cell of one trial there is no test (its resamples would all
be that trial).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from sweeps.fit import LawFit, StepFit, TimeUniversality, fit_law
from sweeps.fit.points import aggregate_all
from sweeps.fit.universality import g_star_raw

ALPHA = 0.05


def fit_over_time(
    group_size: Sequence[int],
    samples_per_step: Sequence[int],
    seed: Sequence[int],
    y_by_step: Mapping[int, Sequence[float]],
    *,
    metric: str = "gap",
    n_boot: int = 200,
    random_state: int = 0,
    known: Mapping[int, LawFit] | None = None,
) -> tuple[dict[int, LawFit], TimeUniversality | None]:
    """The law at each checkpoint and the test of G* against T: ({T: LawFit}, TimeUniversality, or None with fewer
    than 2 checkpoints). group_size, samples_per_step, seed: (n,) one row per trial; y_by_step: checkpoint step T -> (n,)
    the trials' metric at T (NaN where a trial has none); n_boot: bootstrap resamples, for each checkpoint's interval
    and for the slope's; known: fits already made at some checkpoints (the final one, by the caller): not made again."""
    steps = sorted(y_by_step)
    known = known or {}
    fits = {
        t: known[t] if t in known else fit_law(group_size, samples_per_step, seed, y_by_step[t], metric=metric, n_boot=n_boot)
        for t in steps
    }
    if len(steps) < 2:
        return fits, None
    # The test is over the checkpoints whose fit gives a G* (the ones `fit` shows): a boundary fit's raw G* is not one.
    steps = [t for t in steps if _finite(fits[t].g_star)]
    if len(steps) < 2:
        only = f" (T={steps[0]} only)" if steps else ""
        return fits, TimeUniversality(message=f"G* is finite at fewer than 2 checkpoints{only}: no test of G* against T")
    g, b = np.asarray(group_size, dtype=float), np.asarray(samples_per_step, dtype=int)
    y = np.array([np.asarray(y_by_step[t], dtype=float) for t in steps])  # (checkpoints, trials)
    point = _slope(steps, _raw_g_stars(g, b, y))
    if point is None:
        return fits, TimeUniversality(
            message="the unweighted fit's G* is finite at fewer than 2 of the checkpoints with a G*: no test of G* against T"
        )
    cells = [np.flatnonzero((g == gv) & (b == bv)) for gv, bv in sorted(set(zip(g, b)))]
    single = sum(c.size < 2 for c in cells)
    if single:  # its resamples would repeat that trial: a bootstrap blind to its noise, so too narrow an interval
        return fits, TimeUniversality(
            slope=point,
            message=f"{single} of {len(cells)} (G, B) cells have one trial: resampling whole trials needs at least 2 "
            "seeds in each, so no test of G* against T (add seeds)",
        )
    rng = np.random.default_rng(random_state)
    draws = []
    for _ in range(n_boot):
        idx = np.concatenate([rng.choice(c, size=c.size) for c in cells])  # whole trials, within each cell
        s = _slope(steps, _raw_g_stars(g[idx], b[idx], y[:, idx]))
        if s is not None:
            draws.append(s)
    if len(draws) < n_boot // 2:
        return fits, TimeUniversality(slope=point, message="most bootstrap resamples had no finite G* at 2 checkpoints")
    d = np.array(draws)
    lo, hi = (float(v) for v in np.percentile(d, [2.5, 97.5]))
    p = float(min(1.0, 2.0 * min((d <= 0).mean(), (d >= 0).mean())))
    p_text = f"p < {1 / len(draws):.2g}" if p == 0 else f"p = {p:.2g}"  # no resample crossed 0
    stat = f"slope of log G* on log T = {point:.2g}, 95% CI [{lo:.2g}, {hi:.2g}], {p_text}"
    first, last = fits[steps[0]].g_star, fits[steps[-1]].g_star
    trend = f": G* {'grows' if point > 0 else 'shrinks'} from {first:.3g} at T={steps[0]} to {last:.3g} at T={steps[-1]}"
    return fits, _verdict(point, [lo, hi], p, stat, trend)


def _verdict(point: float, ci: list[float], p: float, stat: str, trend: str) -> TimeUniversality:
    """The test's result in words: G* changes with T at ``p`` < ALPHA (``trend`` says how), else one G* fits."""
    message = (
        f"G* changes with training time ({stat}){trend}"
        if p < ALPHA
        else f"one G* over training time is consistent with the data ({stat})"
    )
    return TimeUniversality(slope=point, slope_ci95=ci, p_value=p, rejected=p < ALPHA, message=message)


def step_fits(fits: Mapping[int, LawFit]) -> list[StepFit]:
    """The by_step summary of each checkpoint's fit, in step order."""
    keys = ("status", "g_star", "g_star_ci95", "recommended_group_size", "evidence")
    return [StepFit(step=t, **{k: getattr(f, k) for k in keys}) for t, f in sorted(fits.items())]


def _finite(g_star: float | None) -> bool:
    return g_star is not None and math.isfinite(g_star)


def _raw_g_stars(g: np.ndarray, b: np.ndarray, y: np.ndarray) -> list[float | None]:
    """The continuous G* at each checkpoint (row of y), in units of each row's largest |value|."""
    out: list[float | None] = []
    for row in y:
        keep = np.isfinite(row)
        scale = float(np.abs(row[keep]).max()) if keep.any() else 0.0
        if not keep.any() or scale == 0.0:
            out.append(None)
            continue
        data, _ = aggregate_all(g[keep], b[keep], row[keep] / scale, np.full(int(keep.sum()), np.nan))
        out.append(g_star_raw(data))
    return out


def _slope(steps: Sequence[int], g_stars: Sequence[float | None]) -> float | None:
    """Least-squares slope of log G* on log T over the checkpoints with a finite G* (None: fewer than 2)."""
    pts = [(math.log(t), math.log(v)) for t, v in zip(steps, g_stars) if v is not None and math.isfinite(v) and v > 0]
    if len(pts) < 2:
        return None
    x, z = np.array(pts).T
    return float(np.polyfit(x, z, 1)[0])
