"""Per-prompt group sizes under a fixed budget: the allocation that minimises the law's gradient MSE (THEORY.md).

Prompt x drawn with probability w_x and given G_x completions adds sigma2_x / G_x + kappa_x / (G_x (G_x - 1)) to
the variance of its group's leave-one-out estimate (Zhou et al., arXiv 2603.01162, per prompt). With N prompts a
step, each weighted 1/N, and B = N m completions in all (m = sum_x w_x G_x, the mean group size):

    B x MSE = m (tau2 + sum_x w_x v_x(G_x)),    v_x(G) = sigma2_x / G + kappa_x / (G (G - 1))

which at G_x = G for every prompt is the law's tau2 G + sigma2 + kappa / (G - 1). Its minimiser over the G_x
(docs/THEORY.md, "Per-prompt G": KKT) gives each prompt the G where its marginal variance -v_x'(G) equals one
multiplier lambda = (tau2 + sum w v) / m; one search over lambda finds it. sGPO (arXiv 2606.08854) gives
G_x proportional to 1 / p_x (p_x the prompt's pass rate); we take its best scale, so only its shape is compared.
Group sizes are continuous here and bounded to [G_MIN, g_max], g_max the step's budget B where it is known (a group
never holds more than the step) and G_MAX otherwise; the bucketed table is whole numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

G_MIN, G_MAX = 2.0, 4096.0  # a leave-one-out baseline needs 2; G_MAX keeps tau2 -> 0 finite
BUCKET_EDGES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # pass-rate parts of the table a user applies (the last one closed)


@dataclass(frozen=True)
class PromptComponents:
    """The law's terms prompt by prompt, for K distinct prompts.

    Attributes:
        tau2: spread of the prompts' true gradients, tr Cov_x(g_x) (squared gradient norm).
        weight: (K,) probability of drawing each prompt (sums to 1).
        sigma2: (K,) the oracle's per-completion variance of each prompt, >= 0.
        kappa: (K,) each prompt's leave-one-out excess constant, >= 0.
        pass_rate: (K,) each prompt's mean reward in [0, 1] (sGPO's p and the table's buckets).
    """

    tau2: float
    weight: np.ndarray
    sigma2: np.ndarray
    kappa: np.ndarray
    pass_rate: np.ndarray

    @staticmethod
    def of(tau2: float, sigma2: np.ndarray, kappa: np.ndarray, pass_rate: np.ndarray, weight: np.ndarray | None = None):
        """Components with unbiased per-prompt estimates clamped at 0 (a variance is not negative; the allocation's
        marginals need it) and weights normalised (uniform when None)."""
        k = len(sigma2)
        w = np.full(k, 1.0 / k) if weight is None else np.asarray(weight, np.float64) / np.sum(weight)
        clamp = lambda a: np.maximum(np.asarray(a, np.float64), 0.0)  # noqa: E731
        return PromptComponents(float(tau2), w, clamp(sigma2), clamp(kappa), np.clip(np.asarray(pass_rate, np.float64), 0, 1))


def prompt_variance(c: PromptComponents, sizes: np.ndarray) -> np.ndarray:
    """(K,) v_x(G_x) = sigma2_x / G_x + kappa_x / (G_x (G_x - 1)) for ``sizes`` (K,) >= 2."""
    return c.sigma2 / sizes + c.kappa / (sizes * (sizes - 1))


def scaled_mse(c: PromptComponents, sizes: np.ndarray) -> np.ndarray:
    """B x the batch gradient's MSE when prompt x gets sizes[..., x] completions ((..., K): several allocations at
    once): (sum w G)(tau2 + sum w v); a float for one allocation."""
    return (sizes @ c.weight) * (c.tau2 + prompt_variance(c, sizes) @ c.weight)


def best_uniform(c: PromptComponents, g_max: float = G_MAX) -> float:
    """The uniform G minimising scaled_mse: 1 + sqrt(kappa / tau2) of the weighted means, within [G_MIN, g_max]."""
    kappa = float(c.weight @ c.kappa)
    if c.tau2 <= 0:
        return g_max
    return float(np.clip(1.0 + math.sqrt(kappa / c.tau2), G_MIN, g_max))


def _marginal(c: PromptComponents, g: np.ndarray) -> np.ndarray:
    """(K,) -v_x'(G): sigma2 / G^2 + kappa (2G - 1) / (G^2 (G - 1)^2), decreasing in G > 1."""
    return c.sigma2 / g**2 + c.kappa * (2 * g - 1) / (g**2 * (g - 1) ** 2)


def sizes_at(c: PromptComponents, lam: np.ndarray | float, g_max: float = G_MAX, iterations: int = 50) -> np.ndarray:
    """(K,) the G_x in [G_MIN, g_max] whose marginal variance -v_x'(G_x) is ``lam`` (bisection in log(G - 1)):
    G_MIN where even the first completions gain less than lam, g_max where the last ones still gain more. A (P, 1)
    ``lam`` gives (P, K), one allocation a row."""
    shape = np.broadcast_shapes(np.shape(lam), c.sigma2.shape)
    lo, hi = np.full(shape, math.log(G_MIN - 1)), np.full(shape, math.log(g_max - 1))
    for _ in range(iterations):
        mid = (lo + hi) / 2
        above = _marginal(c, 1 + np.exp(mid)) > lam
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return 1 + np.exp((lo + hi) / 2)


def _search(family, c: PromptComponents, lo: float, hi: float, points: int = 64) -> np.ndarray:
    """The allocation ``family(x)`` ((P, 1) -> (P, K)) with the smallest scaled_mse for x in [lo, hi]: the best of
    a grid, then Brent's method between its neighbours."""
    grid = np.linspace(lo, hi, points)
    values = scaled_mse(c, family(grid[:, None]))
    i = int(np.argmin(values))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, points - 1)]
    found = minimize_scalar(lambda x: scaled_mse(c, family(x)), bounds=(a, b), method="bounded", options={"xatol": 1e-5})
    return family(found.x if found.fun <= values[i] else grid[i])


def optimal_sizes(c: PromptComponents, g_max: float = G_MAX) -> np.ndarray:
    """(K,) the per-prompt G minimising scaled_mse over every allocation (continuous, in [G_MIN, g_max])."""
    top = float(_marginal(c, np.full(len(c.sigma2), G_MIN)).max())
    bottom = float(_marginal(c, np.full(len(c.sigma2), g_max)).min())
    if top <= 0:  # no prompt's variance falls with G: the fewest completions each
        return np.full(len(c.sigma2), G_MIN)
    lo, hi = math.log(max(bottom, top * 1e-14)), math.log(top) + 1
    return _search(lambda x: sizes_at(c, np.exp(x), g_max), c, lo, hi)


def sgpo_sizes(c: PromptComponents, completions: np.ndarray | None = None, g_max: float = G_MAX) -> np.ndarray:
    """(K,) sGPO's G_x = s / p_x at the scale s minimising scaled_mse (within [G_MIN, g_max]); p_x is the pass rate
    smoothed as (p_x n_x + 1/2) / (n_x + 1) with ``completions`` n_x (K,) seen (16 when None), so a prompt never
    solved gets a finite G."""
    n = np.full(len(c.pass_rate), 16.0) if completions is None else np.asarray(completions, np.float64)
    p = (c.pass_rate * n + 0.5) / (n + 1)
    rule = lambda x: np.clip(np.exp(x) / p, G_MIN, g_max)  # noqa: E731
    return _search(rule, c, math.log(G_MIN * p.min()), math.log(g_max * p.max()))


def part_of(pass_rate: np.ndarray | float, edges: Sequence[float] = BUCKET_EDGES) -> np.ndarray:
    """Each pass rate's part of ``edges``: i for edges[i] <= p < edges[i + 1], the last part closed (p = 1 in it)."""
    return np.clip(np.searchsorted(edges, pass_rate, side="right") - 1, 0, len(edges) - 2)


def bucket_table(
    c: PromptComponents, edges: Sequence[float] = BUCKET_EDGES, g_max: float = G_MAX
) -> tuple[list[dict], np.ndarray]:
    """One whole G per pass-rate part: the optimal allocation of the parts' pooled components (a part's prompts
    share its G, so its sigma2 and kappa enter as their weighted mean), rounded, at most ``g_max``. Returns the table
    (rows ``{pass_rate: [lo, hi], share, group_size}`` for parts holding prompts) and (K,) each prompt's G."""
    part = part_of(c.pass_rate, edges)
    used = np.unique(part)
    share = np.array([c.weight[part == b].sum() for b in used])
    pooled = PromptComponents(
        c.tau2,
        share,
        np.array([c.weight[part == b] @ c.sigma2[part == b] for b in used]) / share,
        np.array([c.weight[part == b] @ c.kappa[part == b] for b in used]) / share,
        np.array([edges[b] for b in used]),
    )
    whole = np.clip(np.rint(optimal_sizes(pooled, g_max)), G_MIN, math.floor(g_max))
    rows = [
        {"pass_rate": [edges[b], edges[b + 1]], "share": float(s), "group_size": int(g)} for b, s, g in zip(used, share, whole)
    ]
    return rows, whole[np.searchsorted(used, part)]


def mse_ratios(c: PromptComponents, completions: np.ndarray | None = None, g_max: float = G_MAX) -> dict[str, float] | None:
    """The optimal allocation's, sGPO's and the bucket table's scaled_mse over the best uniform G's, every G at most
    ``g_max``, or None when tau2 <= 0 (the uniform G is unbounded: there is nothing finite to compare with)."""
    if c.tau2 <= 0:
        return None
    return _ratios(c, optimal_sizes(c, g_max), bucket_table(c, g_max=g_max)[1], completions, g_max)


def _ratios(
    c: PromptComponents, best: np.ndarray, table: np.ndarray, completions: np.ndarray | None, g_max: float
) -> dict[str, float]:
    """mse_ratios given the optimal allocation ``best`` and the table's per-prompt G ``table`` (each (K,))."""
    ratio = _over_uniform(c, g_max)
    return {
        "mse_ratio": ratio(best),
        "sgpo_mse_ratio": ratio(sgpo_sizes(c, completions, g_max)),
        "bucket_mse_ratio": ratio(table),
    }


def _over_uniform(c: PromptComponents, g_max: float):  # noqa: ANN202 - (K,) sizes -> float
    """sizes -> scaled_mse(c, sizes) over the best uniform G's (at most ``g_max``)."""
    uniform = scaled_mse(c, np.full(len(c.sigma2), best_uniform(c, g_max)))
    return lambda sizes: float(scaled_mse(c, sizes) / uniform)


def _resampled(c: PromptComponents, g_max: float) -> tuple[float, float]:
    """(the optimum's ratio, the table's ratio) at one resample of the prompts, each allocation fitted to it."""
    ratio = _over_uniform(c, g_max)
    return ratio(optimal_sizes(c, g_max)), ratio(bucket_table(c, g_max=g_max)[1])


def _interval(draws: np.ndarray, estimate: float) -> list[float | None]:
    """The 2.5th and 97.5th percentiles of ``draws`` widened to hold ``estimate``; [None, None] below 20 draws.

    A ratio of fitted allocations is a minimum over allocations, and a resample of K prompts (with repeats, so fewer
    distinct ones) is fitted less closely than the prompts themselves: the draws can sit wholly above the estimate,
    and the percentile interval alone would then exclude the estimate it is the interval of."""
    if len(draws) < 20:
        return [None, None]
    lo, hi = float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))
    return [min(lo, estimate), max(hi, estimate)]


def _saving(ratio: float, ci: Sequence[float | None]) -> str:
    """A ratio's saving in words, said only when its interval lies below 1 (fewer completions for the same noise)."""
    lo, hi = ci
    if lo is None or hi is None:
        return "no saving shown (too few resamples for an interval)"
    if hi >= 1.0:
        return f"no saving shown (95% CI of the ratio [{lo:.3g}, {hi:.3g}] reaches 1)"
    return f"{100 * (1 - ratio):.0f}% fewer completions (95% CI {100 * (1 - hi):.0f}%-{100 * (1 - lo):.0f}%)"


def summary(
    c: PromptComponents, resamples: Sequence[PromptComponents], completions: np.ndarray | None = None, g_max: float = G_MAX
) -> dict:
    """The ``per_prompt`` block of a probe or an answer (JSON-ready): mse_ratios at ``c`` with every G at most
    ``g_max`` (B: a group never exceeds the step), mse_ratio_ci95 and bucket_mse_ratio_ci95 (percentiles over
    ``resamples`` of the prompts with tau2 > 0, each refitted; widened to hold the estimate; null with fewer than 20
    of them), the bucket table, the best uniform G and the optimal allocation's mean G; null ratios with a reason
    when tau2 <= 0. The message states a saving only where its interval lies below a ratio of 1."""
    if c.tau2 <= 0:
        return {
            "mse_ratio": None,
            "mse_ratio_ci95": [None, None],
            "sgpo_mse_ratio": None,
            "bucket_mse_ratio": None,
            "bucket_mse_ratio_ci95": [None, None],
            "buckets": [],
            "reason": "tau2 <= 0: the best uniform G is unbounded, so no ratio to it",
        }
    draws = np.array([_resampled(r, g_max) for r in resamples if r.tau2 > 0]).reshape(-1, 2)
    best, (rows, table) = optimal_sizes(c, g_max), bucket_table(c, g_max=g_max)  # each once: ratios and block share them
    ratios = _ratios(c, best, table, completions, g_max)
    ci, bucket_ci = _interval(draws[:, 0], ratios["mse_ratio"]), _interval(draws[:, 1], ratios["bucket_mse_ratio"])
    return {
        **ratios,
        "mse_ratio_ci95": ci,
        "bucket_mse_ratio_ci95": bucket_ci,
        "buckets": rows,
        "uniform_group_size": best_uniform(c, g_max),
        "mean_group_size": float(c.weight @ best),
        "max_group_size": g_max,
        "prompts": len(c.sigma2),
        "message": (
            f"one G per pass-rate part (the table): {_saving(ratios['bucket_mse_ratio'], bucket_ci)}, for the best uniform "
            f"G's gradient noise; G fitted to each probed prompt: {_saving(ratios['mse_ratio'], ci)} (an upper bound: "
            "optimistic where prompts are many and each probed a few times)"
        ),
    }
