"""How G* moves while the policy trains: log(G* - 1) against training steps, extrapolated to the spec's T (pure maths).

The law's constants tau2, sigma2, kappa are moments at the current policy (THEORY.md "Is G* universal in
time?"), so the probe's G*(t) = 1 + sqrt(kappa_t / tau2_t) drifts as training moves the policy, and the grid's
G* after T steps reflects where training went, not where it started. The pilot trial probes its policy at a
few steps t_1 < ... < t_k; with the start probe's G*(0) these points are fitted by ordinary least squares

    log(G*(t) - 1) = alpha + beta * t / T

(log(G* - 1) = log sqrt(kappa / tau2): a ratio of moments, so a log scale), and the fit is read at t = T with a
95% prediction interval (Student t, n - 2 degrees of freedom). The residual variance is floored at the start
probe's own sampling variance scaled to the pilot probes' fewer prompts, so that points that happen to lie on a
line do not give a falsely tight interval. An upper end beyond G_MAX (4096 completions a group, more than any
budget holds) is open above: inf, which the answer serves as null with "G* is at least lo".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from sweeps.allocation import G_MAX

LOG_FLOOR = 1e-3  # G* - 1 below this (kappa ~ 0) is read as this: log(0) is -inf


@dataclass(frozen=True)
class Drift:
    """G* read at ``at`` steps from the drift fit: ``g_star`` with 95% prediction interval ``ci95`` (upper end inf:
    open above); ``slope`` is d log(G* - 1) / d(t / T) with its 95% interval (0 outside it: G* moves)."""

    at: int
    g_star: float
    ci95: tuple[float, float]
    slope: float
    slope_ci95: tuple[float, float]
    points: int

    @property
    def moves(self) -> bool:
        return not self.slope_ci95[0] <= 0.0 <= self.slope_ci95[1]


def extrapolate(points: Sequence[tuple[int, float]], at: int, noise_floor: float = 0.0) -> Drift | None:
    """G* at step ``at`` from (step, G*) points by the fit above.

    Args:
        points: (t, G*(t)) with t in steps (0 for the start probe) and G* > 1, finite; at least 3 distinct t.
        at: the step to read the fit at (the spec's T), > 0.
        noise_floor: standard deviation of one point's log(G* - 1), the least the residual one is taken to be.
    Returns:
        Drift, or None with fewer than 3 points at distinct steps.
    """
    pts = [(t, g) for t, g in points if g is not None and math.isfinite(g)]
    if len({t for t, _ in pts}) < 3:
        return None
    x = np.array([t / at for t, _ in pts], dtype=float)
    y = np.log(np.maximum(np.array([g for _, g in pts], dtype=float) - 1.0, LOG_FLOOR))
    n = x.size
    design = np.column_stack([np.ones(n), x])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    s2 = max(float(resid @ resid) / (n - 2), noise_floor**2)
    sxx = float(((x - x.mean()) ** 2).sum())
    q = float(stats.t.ppf(0.975, n - 2))
    pred = float(coef[0] + coef[1])  # at x = 1
    se_pred = math.sqrt(s2 * (1.0 + 1.0 / n + (1.0 - x.mean()) ** 2 / sxx))
    se_slope = math.sqrt(s2 / sxx)
    lo, hi = pred - q * se_pred, pred + q * se_pred
    return Drift(
        at=at,
        g_star=1.0 + math.exp(pred),
        ci95=(1.0 + math.exp(lo), 1.0 + math.exp(hi) if hi < math.log(G_MAX - 1.0) else math.inf),
        slope=float(coef[1]),
        slope_ci95=(float(coef[1] - q * se_slope), float(coef[1] + q * se_slope)),
        points=n,
    )
