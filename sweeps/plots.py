"""The fit plot: metric vs G per budget, with seed error bars, the fitted curve and G*."""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from sweeps.fit import LawFit, law_curve


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
    swept = sorted({int(p["group_size"]) for b in fit.per_budget for p in b.points})
    if swept:  # ticks at the swept G, read as plain numbers (not powers of 2)
        ax.set_xticks(swept, [str(g) for g in swept])
        ax.minorticks_off()
    ax.set_xlabel("group size G (completions per prompt)")
    ax.set_ylabel(fit.metric + (" (higher is better)" if fit.maximize else " (lower is better)"))
    ax.set_title(title or f"group-size law fit: {fit.status}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_g_star_over_time(fit: LawFit, title: str = "") -> Figure | None:
    """G* at each eval checkpoint with its 95% interval (fit.by_step); None with fewer than 2 finite G*."""
    pts = [f for f in fit.by_step if f.g_star is not None]
    if len(pts) < 2:
        return None
    fig = Figure(figsize=(6.4, 4.2), dpi=110)
    ax = fig.add_subplot()
    t = np.array([f.step for f in pts], dtype=float)
    g = np.array([f.g_star for f in pts])
    ci = [f.g_star_ci95 if f.g_star_ci95 and None not in f.g_star_ci95 else [v, v] for f, v in zip(pts, g)]
    err = np.abs(np.array(ci, dtype=float).T - g)
    ax.errorbar(t, g, yerr=err, fmt="o-", capsize=3, label="G* (95% interval)" if err.any() else "G* (no finite interval)")
    ax.set_xscale("log")
    ax.set_yscale("log", base=2)
    ax.set_xticks(t, [str(int(v)) for v in t])  # the checkpoints, read as plain numbers
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6))  # a log axis over less than a decade gets no ticks of its own
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.minorticks_off()
    ax.set_xlabel("training step T")
    ax.set_ylabel("G*")
    uni = fit.time_universality
    ax.set_title(title or "G* over training time")
    lines = textwrap.wrap(uni.message, 100)[:3] if uni is not None and uni.message else []  # the verdict, whole
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, va="bottom")
    ax.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.035 * len(lines), 1, 1))  # room below the axes for the verdict's lines
    return fig
