"""The fit plot: metric vs G per budget, with seed error bars, the fitted curve and G*."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from sweeps.law import LawFit, law_curve


def plot_fit(fit: LawFit, title: str = "") -> Figure:
    """One curve per budget B. Uses the object-oriented API (no pyplot state), so it is thread-safe."""
    fig = Figure(figsize=(6.4, 4.2), dpi=110)
    ax = fig.add_subplot()
    for i, b in enumerate(fit.per_budget):
        color = f"C{i}"
        g = np.array([p["group_size"] for p in b.points], dtype=float)
        m = np.array([p["mean"] for p in b.points])
        se = np.array([p["se"] if p["se"] is not None else 0.0 for p in b.points])
        sign = -1.0 if fit.maximize else 1.0
        ax.errorbar(g, sign * m, yerr=se, fmt="o", color=color, capsize=3, label=f"B={b.samples_per_step} ({b.status})")
        if b.a is not None and b.b is not None and b.c is not None and g.size:
            grid = np.geomspace(max(g.min(), 1.5), g.max(), 200)
            ax.plot(grid, sign * law_curve(grid, b.a, b.b, b.c), "-", color=color, alpha=0.8)
        if b.g_star is not None:
            ax.axvline(b.g_star, color=color, ls=":", alpha=0.8)
    if fit.g_star is not None:
        ax.axvline(fit.g_star, color="k", ls="--", label=f"G* = {fit.g_star:.2f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size G (completions per prompt)")
    ax.set_ylabel(fit.metric + (" (higher is better)" if fit.maximize else " (lower is better)"))
    ax.set_title(title or f"group-size law fit: {fit.status}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
