"""The law's curve, its optimum G* and the sign-constrained least squares that fits it.

Source: Zhou et al., "Demystifying Group Relative Policy Optimization: Its Policy Gradient is a
U-Statistic", arXiv 2603.01162 (2026); THEORY.md "The law". At a fixed budget B the final gap after T
steps follows

    gap(G) = a + b * G + c / (G - 1),   b, c >= 0,   G* = 1 + sqrt(c / b),

linear in (a, b, c): fitted by weighted least squares on the basis [1, G, 1/(G-1)] with b, c >= 0.
The gradient's variance law (sweeps.components) has the same shape with b = tau2, c = kappa.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

N_PARAMS = 3  # a, b, c
TINY = 1e-12  # a coefficient or spread at or below this (in units of the largest |metric|) is numerically zero


def law_curve(g: np.ndarray | float, a: float, b: float, c: float) -> np.ndarray:
    """gap(G) = a + b G + c / (G - 1) (THEORY.md). g: group sizes > 1."""
    g = np.asarray(g, dtype=float)
    return a + b * g + c / (g - 1.0)


def g_star_of(b: float, c: float, *, b_zero: float = 0.0) -> float:
    """G* = 1 + sqrt(c / b), the minimum of b G + c / (G - 1) over G > 1 (THEORY.md).

    Args:
        b: the cost per unit of G (>= 0); at or below ``b_zero`` it counts as none and G* is inf
            (larger G always better).
        c: the cost of small groups (negative counts as 0: G* = 1).
        b_zero: the threshold of a numerically zero b (the fit passes TINY; exact components pass 0).
    """
    if b <= b_zero:
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


def tie_set(lo: float, hi: float, candidates: Sequence[int]) -> list[int]:
    """The candidates that ``recommend_group_size`` picks for some G* in [lo, hi] (the pick is monotone in G*;
    hi may be inf: up to the largest candidate)."""
    first, last = recommend_group_size(lo, candidates), recommend_group_size(hi, candidates)
    return [g for g in sorted(candidates) if first <= g <= last]


def design(g: np.ndarray) -> np.ndarray:
    """(n, 3) regressors [1, G, 1/(G-1)] of the law a + b G + c/(G-1)."""
    return np.stack([np.ones_like(g), g, 1.0 / (g - 1.0)], axis=1)


def nnls_free_intercept(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
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
        if (coef[1:] < -TINY).any():
            continue
        coef[1:] = np.maximum(coef[1:], 0.0)
        rss = float(((xw @ coef - yw) ** 2).sum())
        if rss < best_rss - TINY:
            best, best_rss = coef, rss
    return best, best_rss


def slope_rss(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted RSS of y = a + s z with s >= 0 and a free, for each row of z at once (closed form).

    z: (m, n) regressors, one row per candidate; y, w: (n,) values and weights. Minimises
    sum w^2 (y - a - s z)^2: with weighted centred sums Szz, Szy, Syy, s = max(0, Szy / Szz) and
    RSS = Syy - s Szy (ordinary weighted simple regression, the slope clamped at its bound).
    Returns (m,) RSS >= 0; the same values as nnls_free_intercept on [1, z], without its lstsq calls.
    """
    ww = w**2
    yc = y - (ww @ y) / ww.sum()
    zc = z - ((z @ ww) / ww.sum())[:, None]
    szz, szy, syy = (zc**2) @ ww, (zc * yc) @ ww, float((yc**2) @ ww)
    flat = szz <= TINY * ((z**2) @ ww)  # z constant: no slope
    slope = np.where(flat, 0.0, np.maximum(szy, 0.0) / np.where(flat, 1.0, szz))
    return np.maximum(syy - slope * szy, 0.0)
