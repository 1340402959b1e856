"""The law fitted at one budget B, and where G* lies against the grid's edges."""

from __future__ import annotations

import math

import numpy as np

from sweeps.fit.curve import N_PARAMS, TINY, design, g_star_of, nnls_free_intercept, recommend_group_size
from sweeps.fit.points import Points, unusable
from sweeps.fit.result import BudgetFit


def fit_budget(b: int, pts: Points) -> BudgetFit:
    """The law a + b G + c / (G - 1) fitted to one budget's weighted seed means (THEORY.md "Fitting rules").

    Args:
        b: the budget B (samples per step); pts: its points (sweeps.fit.points).
    Returns:
        BudgetFit: ok with G*, boundary (G* at or past an edge of the grid: no G*, advice in ``message``), or
        insufficient_data / no_signal without coefficients.
    """
    points = [
        {"group_size": int(g), "mean": float(m), "se": None if not np.isfinite(s) else float(s), "n_seeds": int(k)}
        for g, m, s, k in zip(pts.g, pts.y, pts.se, pts.n)
    ]
    base = {"samples_per_step": b, "points": points}
    bad = unusable(b, pts)
    if bad is not None:
        return BudgetFit(**base, status=bad[0], message=bad[1])
    w = pts.w
    coef, rss = nnls_free_intercept(design(pts.g), pts.y, w)
    a, bb, c = (float(v) for v in coef)
    ybar = float(np.average(pts.y, weights=w**2))
    tss = float(((pts.y - ybar) ** 2 * w**2).sum())
    dof = pts.g.size - N_PARAMS
    gs = g_star_of(bb, c, b_zero=TINY)
    lo, hi = float(pts.g.min()), float(pts.g.max())
    edge = grid_edge(gs, int(lo), int(hi))
    return BudgetFit(
        **base,
        status="ok" if edge is None else "boundary",
        g_star=gs if edge is None else None,
        a=a,
        b=bb,
        c=c,
        recommended_group_size=recommend_group_size(gs, _divisors_in(b, lo, hi) or [int(v) for v in pts.g]),
        r2=1.0 - rss / tss if tss > TINY else None,
        chi2_per_dof=rss / dof if dof > 0 else None,
        message="" if edge is None else f"B={b}: " + edge_advice(*edge),
    )


def grid_edge(g_star: float, lo: int, hi: int) -> tuple[str, int] | None:
    """("below", lo) or ("above", hi) when G* is at or beyond an edge of the grid [lo, hi], else None."""
    if g_star <= lo:
        return "below", lo
    if g_star >= hi:
        return "above", hi
    return None


def edge_advice(side: str, edge: int) -> str:
    """What to do when G* lies at or past the grid's ``edge`` on ``side`` (below | above)."""
    if side == "below" and edge <= 2:
        return (
            "G* is at or below 2, the smallest group size: use G = 2 (the fit finds no interior optimum, "
            "so smaller groups and more prompts win throughout the grid)"
        )
    return f"G* is at or {side} the edge of the grid ({edge}); extend group_sizes {side} {edge} before trusting a recommendation"


def _divisors_in(b: int, lo: float, hi: float) -> list[int]:
    return [g for g in range(max(2, math.ceil(lo)), int(hi) + 1) if b % g == 0]
