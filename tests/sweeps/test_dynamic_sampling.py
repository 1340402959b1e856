"""The law under dynamic sampling (sweeps.dynamic_sampling) against a Monte Carlo of DAPO's filter on the bandit.

Each draw is one informative group of the check bandit (THEORY.md): a context drawn uniformly, G arms from the
softmax policy, Bernoulli rewards, the group redrawn while its rewards are all equal; its leave-one-out gradient
Y' lives in the context's row. The MSE of q Y' against the exact g is the formula's at B = G (one group); N groups
divide it by N. Tolerances are 4 Monte Carlo standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeps.components import VarianceComponents
from sweeps.dynamic_sampling import FilteredLaw
from workers.tasks.bandit import BanditTask

GRID = (2, 3, 4, 6, 8, 12)
DRAWS = 60_000


def informative_groups(task: BanditTask, logits: np.ndarray, g: int, n: int, rng: np.random.Generator):
    """n informative groups of size g: (contexts (n,), arms (n, g), rewards (n, g)), by rejection."""
    p = task.success_rates
    pi = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(pi / pi.sum(axis=1, keepdims=True), axis=1)
    kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    have = 0
    while have < n:
        x = rng.integers(0, len(p), size=2 * n)
        arms = np.minimum((rng.random((2 * n, g))[:, :, None] > cdf[x][:, None, :]).sum(axis=2), p.shape[1] - 1)
        r = (rng.random((2 * n, g)) < p[x[:, None], arms]).astype(np.float64)
        keep = r.min(axis=1) < r.max(axis=1)
        kept.append((x[keep], arms[keep], r[keep]))
        have += int(keep.sum())
    x, arms, r = (np.concatenate(parts)[:n] for parts in zip(*kept))
    return x, arms, r


def filtered_errors(task: BanditTask, law: FilteredLaw, logits: np.ndarray, g: int, rng: np.random.Generator):
    """(DRAWS,) ||q Y' - g||^2 of single informative groups with leave-one-out advantages."""
    x, arms, r = informative_groups(task, logits, g, DRAWS, rng)
    advantage = r - (r.sum(axis=1, keepdims=True) - r) / (g - 1)
    k = logits.shape[1]
    y = np.zeros((DRAWS, k))
    np.add.at(y, (np.repeat(np.arange(DRAWS), g), arms.reshape(-1)), advantage.reshape(-1) / g)
    pi = np.exp(logits - logits.max(axis=1, keepdims=True))
    pi /= pi.sum(axis=1, keepdims=True)
    rows = pi * (task.success_rates - law.pass_rate[:, None]) * law.weight[:, None]  # g, row by row
    q = law.informative_share(g)
    # Sum_i A_i = 0 for leave-one-out, so the score's -pi part cancels: Y' = (1/G) sum_i A_i e_{a_i} in row x.
    return law.grad_norm2 - 2 * q * (y * rows[x]).sum(axis=1) + q**2 * (y**2).sum(axis=1)


@pytest.fixture(scope="module")
def bandit():
    task = BanditTask()
    return task, task.exact_filtered_law(), task.initial_logits


@pytest.fixture(scope="module")
def monte_carlo(bandit):
    task, law, logits = bandit
    rng = np.random.default_rng(1)
    out = {}
    for g in GRID:
        e = filtered_errors(task, law, logits, g, rng)
        out[g] = (e.mean(), e.std(ddof=1) / math.sqrt(e.size))
    return out


def test_the_filtered_steps_mse_matches_a_monte_carlo_of_dapos_filter_at_every_g(bandit, monte_carlo):
    _, law, _ = bandit
    for g, (mean, se) in monte_carlo.items():
        assert law.trained_mse(g, g) == pytest.approx(mean, abs=4 * se), g


def test_the_derived_g_star_lies_in_the_monte_carlo_grids_tie_set_at_each_cost(bandit, monte_carlo):
    """F(G; rho) from the Monte Carlo MSEs (one group: F = MSE x G (1 / q + rho)); the tie set is the grid's G within
    2 combined standard errors of its best; the derived G* must fall between its ends (at rho = inf, per trained
    completion: F = MSE x G)."""
    _, law, _ = bandit
    for rho in (0.0, 1.0, math.inf):
        scale = {g: g * (1.0 if math.isinf(rho) else 1.0 / law.informative_share(g) + rho) for g in GRID}
        f = {g: (m * scale[g], se * scale[g]) for g, (m, se) in monte_carlo.items()}
        best = min(f, key=lambda g: f[g][0])
        ties = [g for g in GRID if f[g][0] - f[best][0] <= 2 * math.hypot(f[g][1], f[best][1])]
        assert min(ties) - 0.5 <= law.g_star(rho) <= max(ties) + 0.5, (rho, ties, law.g_star(rho))


def test_the_cost_is_the_mc_checked_mse_times_what_a_step_costs(bandit):
    """F(G; rho) = B x MSE x (1 / q + rho): a step of B trained completions samples B / q on average."""
    _, law, _ = bandit
    for g in GRID:
        q = law.informative_share(g)
        for rho in (0.0, 0.5, 3.0):
            assert law.cost_mse(g, rho) == pytest.approx(law.trained_mse(g, 96) * 96 * (1 / q + rho), rel=1e-12)
        assert law.cost_mse(g, math.inf) == pytest.approx(law.trained_mse(g, 96) * 96, rel=1e-12)


def test_check_values_of_theory(bandit):
    """docs/THEORY.md, "Dynamic sampling": the check bandit's G* at rho = 0, 1 and inf."""
    _, law, _ = bandit
    assert law.components.g_star == pytest.approx(4.205, abs=0.005)
    assert law.g_star(0.0) == pytest.approx(4.181, abs=0.005)
    assert law.g_star(1.0) == pytest.approx(2.977, abs=0.005)
    assert law.g_star(math.inf) == pytest.approx(2.0)
    assert law.informative_share(2) == pytest.approx(0.416, abs=0.0005)


def test_without_anything_to_filter_the_cost_is_the_law():
    """Pass rates 1/2 and huge G: q -> 1, so F(G; 0) -> L(G), and at rho the cost scales by 1 + rho."""
    law = FilteredLaw(VarianceComponents(0.01, 0.1, 0.2), 0.001, np.array([0.5]), np.array([1.0]))
    assert law.cost_mse(60, 0.0) == pytest.approx(law.law(60), rel=1e-12)
    assert law.cost_mse(60, 2.0) == pytest.approx(3 * law.law(60), rel=1e-12)
    assert law.informative_share(3) == pytest.approx(0.75)


def test_bad_inputs_are_named():
    law = FilteredLaw(VarianceComponents(0.01, 0.1, 0.2), 0.001, np.array([0.0, 1.0]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="pass rate is 0 or 1"):
        law.cost_mse(4)
    ok = FilteredLaw(VarianceComponents(0.01, 0.1, 0.2), 0.001, np.array([0.5]), np.array([1.0]))
    with pytest.raises(ValueError, match="group_size"):
        ok.trained_mse(1, 8)
    with pytest.raises(ValueError, match="update_cost"):
        ok.cost_mse(4, -1.0)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.85])
def test_the_probes_all_equal_share_is_unbiased_up_to_m_draws(p):
    """E over k ~ Binomial(M, p) successes of sum_v C(k_v, G) / C(M, G) is p^G + (1 - p)^G exactly for G <= M; the
    plug-in (k / M)^G + (1 - k / M)^G is not (at p = 0.1, M = 8, G = 4 it reads 0.74 against 0.656)."""
    from scipy.stats import binom

    from sweeps.dynamic_sampling import all_equal_shares

    m, gs = 8, np.array([2, 3, 4, 6, 8])
    expected = np.zeros(gs.size)
    for k in range(m + 1):
        row = np.array([1.0] * k + [0.0] * (m - k))
        expected += binom.pmf(k, m, p) * all_equal_shares(row[None, :], gs)[0]
    np.testing.assert_allclose(expected, p**gs + (1 - p) ** gs, rtol=1e-12)


def test_all_equal_shares_count_every_reward_value_and_past_m_take_the_plug_in():
    """Three values 0, 0.5, 1 (two 1s in four draws): P(a pair is equal) = C(2, 2) / C(4, 2) = 1/6; at G = 5 > M = 4
    the plug-in 2 (1/4)^5 + (1/2)^5."""
    from sweeps.dynamic_sampling import all_equal_shares

    shares = all_equal_shares(np.array([[0.0, 0.5, 1.0, 1.0]]), np.array([2, 3, 5]))[0]
    np.testing.assert_allclose(shares, [1 / 6, 0.0, 2 * 0.25**5 + 0.5**5])


def test_the_trained_cost_mse_is_the_filtered_laws_at_fixed_trained_b():
    """With each prompt's exact all-equal share p^G + (1 - p)^G, trained_cost_mse is FilteredLaw.cost_mse(G, inf) =
    q L - (1 - q) G ||g||^2; and it can put G* above 2: pass rates 1/2 (q(2) = 1/2, q(4) = 7/8) with kappa = 100,
    tau2 = 1, sigma2 = 1, ||g||^2 = 0.5 give F(2) = (2 + 1 + 100) / 2 - 2 / 2 0.5 = 51.0 against F(4) = 7/8 (4 + 1 +
    100/3) - 4/8 0.5 = 33.29."""
    from sweeps.dynamic_sampling import trained_cost_mse

    task = BanditTask()
    law = task.exact_filtered_law()
    gs = np.array(GRID)
    p, w = law.pass_rate, law.weight
    equal = np.stack([w.size * w * (p**g + (1 - p) ** g) for g in gs], axis=1)  # weighted rows: their mean is the E_x
    got = trained_cost_mse(law.components, law.grad_norm2, equal, gs)
    np.testing.assert_allclose(got, [law.cost_mse(g, math.inf) for g in gs], rtol=1e-9)
    halves = np.stack([0.5 ** np.array([2, 4]) * 2] * 3)
    f = trained_cost_mse(VarianceComponents(tau2=1.0, sigma2=1.0, kappa=100.0), 0.5, halves, np.array([2, 4]))
    np.testing.assert_allclose(f, [51.0, 33.2916666666667], rtol=1e-12)
