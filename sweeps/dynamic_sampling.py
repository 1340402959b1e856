"""The law under dynamic sampling (DAPO's filter of groups whose rewards are all equal): its MSE, cost and G*.

DAPO (Yu et al., arXiv 2503.14476, sec. 3.2; verl's recipe/dapo ``algorithm.filter_groups``) drops every group whose G
rewards are equal and samples again until the step holds N = B / G informative groups. Such a group has zero
advantage under every estimator (leave-one-out: r_i - mean of the others = 0), so its per-group gradient Y = g_hat_x
is exactly 0, and with I the event "informative" and q(G) = P(I) (THEORY.md, "Dynamic sampling"):

    E[Y | I] = E[Y] / q = g / q                    the filtered step estimates g / q: the direction of g
    E||Y||^2 | I = (S + ||g||^2) / q               S(G) = tau2 + sigma2 / G + kappa / (G (G - 1)) = L(G) / G
    E||q Ybar - g||^2 = (q L(G) - (1 - q) G ||g||^2) / B          (N = B / G trained groups, exact)

with L(G) = tau2 G + sigma2 + kappa / (G - 1) the law's B x MSE. q Ybar is the unbiased one of the filtered estimates;
its MSE over ||g||^2 is the step's noise-to-signal ratio, which is what an optimizer that normalises the step (Adam)
sees. A step samples B / q completions on average and trains B; at cost 1 per sampled completion and rho per trained
one, the MSE at a fixed cost is proportional to

    F(G; rho) = (L(G) - G ||g||^2 (1 - q) / q) (1 + rho q)

rho = 0: sampling is the cost (also the MSE of a step that samples a fixed B and trains what it keeps, to first order
in 1 / N); rho -> inf: only trained completions cost, F -> q L - (1 - q) G ||g||^2. G*(rho) minimises F. With 0/1
rewards q(G) = 1 - E_x [p_x^G + (1 - p_x)^G], p_x the prompt's pass rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import comb

from sweeps.allocation import G_MAX, G_MIN
from sweeps.components import VarianceComponents

GRID_POINTS = 400  # log-spaced G of the search before Brent's refinement


@dataclass(frozen=True)
class FilteredLaw:
    """The law's terms plus what the filter needs, for 0/1 rewards.

    Attributes:
        components: tau2, sigma2, kappa (squared gradient norm) at the policy.
        grad_norm2: ||g||^2 of the full gradient g = E_x g_x (same units).
        pass_rate: (K,) each prompt's probability of reward 1, in [0, 1].
        weight: (K,) the probability of drawing each prompt (sums to 1).
    """

    components: VarianceComponents
    grad_norm2: float
    pass_rate: np.ndarray
    weight: np.ndarray

    def informative_share(self, group_size: float) -> float:
        """q(G) = 1 - sum_x w_x (p_x^G + (1 - p_x)^G): the probability that a group's rewards are not all equal."""
        p, g = self.pass_rate, float(group_size)
        return float(1.0 - self.weight @ (p**g + (1.0 - p) ** g))

    def law(self, group_size: float) -> float:
        """L(G) = tau2 G + sigma2 + kappa / (G - 1), the unfiltered B x MSE."""
        return self.components.gradient_mse(group_size, 1)

    def trained_mse(self, group_size: float, samples_per_step: float) -> float:
        """E||q Ybar - g||^2 of a step that trains ``samples_per_step`` completions (B / G informative groups).

        Raises:
            ValueError: G < 2, or no group can be informative (q = 0: every pass rate is 0 or 1).
        """
        g, q = self._checked(group_size)
        return (q * self.law(g) - (1.0 - q) * g * self.grad_norm2) / samples_per_step

    def cost_mse(self, group_size: float, update_cost: float = 0.0) -> float:
        """F(G; rho): the MSE at a fixed cost, in units of the law's B x MSE; rho = ``update_cost`` is a trained
        completion's cost over a sampled one's (math.inf: only training costs, F = q L - (1 - q) G ||g||^2).

        Raises:
            ValueError: as trained_mse; rho < 0.
        """
        if update_cost < 0:
            raise ValueError(f"update_cost must be >= 0 (a trained completion's cost over a sampled one's), got {update_cost}")
        g, q = self._checked(group_size)
        return filtered_cost_mse(self.law(g), g, q, self.grad_norm2, update_cost)

    def g_star(self, update_cost: float = 0.0, g_max: float = G_MAX) -> float:
        """The G in [2, g_max] minimising F(G; rho): a log-spaced search, refined by Brent's method between the
        best point's neighbours. Raises ValueError as cost_mse."""
        grid = np.geomspace(G_MIN, g_max, GRID_POINTS)
        values = [self.cost_mse(g, update_cost) for g in grid]
        i = int(np.argmin(values))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, GRID_POINTS - 1)]
        best = minimize_scalar(lambda g: self.cost_mse(g, update_cost), bounds=(lo, hi), method="bounded")
        return float(best.x) if best.fun <= values[i] else float(grid[i])

    def _checked(self, group_size: float) -> tuple[float, float]:
        g = float(group_size)
        if g < G_MIN:
            raise ValueError(f"group_size (G) must be >= 2, got {group_size}")
        q = self.informative_share(g)
        if q <= 0:
            raise ValueError("no group can be informative: every prompt's pass rate is 0 or 1")
        return g, q


def filtered_cost_mse(law: float, group_size: float, q: float, grad_norm2: float, update_cost: float) -> float:
    """F(G; rho) from L(G) = ``law``, q = q(G) > 0 and ||g||^2 (module docstring); rho = ``update_cost`` >= 0, math.inf:
    only trained completions cost, F = q L - (1 - q) G ||g||^2."""
    if math.isinf(update_cost):
        return q * law - (1.0 - q) * group_size * grad_norm2
    return (law - group_size * grad_norm2 * (1.0 - q) / q) * (1.0 + update_cost * q)


def all_equal_shares(rewards: np.ndarray, group_sizes: np.ndarray) -> np.ndarray:
    """(K, len(group_sizes)): each probed prompt's chance that a group of G fresh rewards is all equal, from its M
    rewards (row of ``rewards``, (K, M)). Any reward values: with k_v of the M draws at value v, sum_v C(k_v, G) /
    C(M, G), the U-statistic of P(G draws all equal) = sum_v P(v)^G (Hoeffding 1948), unbiased for G <= M; for G > M
    the plug-in sum_v (k_v / M)^G (biased up: a prompt seen all-equal in M draws counts as always all-equal)."""
    m = rewards.shape[1]
    g = np.asarray(group_sizes, dtype=np.int64)
    out = np.empty((rewards.shape[0], g.size))
    for i, row in enumerate(rewards):
        counts = np.unique(row, return_counts=True)[1].astype(np.float64)
        exact = comb(counts[:, None], np.minimum(g, m)[None, :]).sum(axis=0) / comb(m, np.minimum(g, m))
        out[i] = np.where(g <= m, exact, ((counts[:, None] / m) ** g[None, :]).sum(axis=0))
    return out


def trained_cost_mse(
    components: VarianceComponents, grad_norm2: float, all_equal: np.ndarray, group_sizes: np.ndarray
) -> np.ndarray:
    """F(G; inf) = q L(G) - (1 - q) G ||g||^2 at each G of ``group_sizes``: the MSE of a step of B trained completions
    (times B), a sweep's own cost at fixed B a step and T steps, with q(G) = 1 - the mean over probed prompts of
    ``all_equal`` (K, len(group_sizes); all_equal_shares). inf where q = 0 (no group can be informative)."""
    q = 1.0 - all_equal.mean(axis=0)
    return np.array(
        [
            filtered_cost_mse(components.gradient_mse(g, 1), float(g), qg, grad_norm2, math.inf) if qg > 0 else math.inf
            for g, qg in zip(group_sizes, q, strict=True)
        ]
    )
