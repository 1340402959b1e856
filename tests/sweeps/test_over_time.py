"""G* over training time (sweeps.over_time): the law at each checkpoint and the test of G* against T."""

import numpy as np
import pytest

from sweeps.over_time import fit_over_time, step_fits

GRID = [2, 3, 4, 6, 8, 12, 16, 24]
STEPS = [10, 20, 40]


def table(g_star_at, noise=0.01, seeds=range(4), rng_seed=0):
    """One row per trial (G, B=48, seed) with the law's gap at each checkpoint: G*(T) = g_star_at(T).
    Each trial has its own multiplicative offset shared by its checkpoints (one run)."""
    rng = np.random.default_rng(rng_seed)
    rows = [(g, s, 1 + noise * rng.standard_normal()) for g in GRID for s in seeds]
    y = {}
    for t in STEPS:
        rho = (g_star_at(t) - 1) ** 2
        y[t] = [(0.1 + 0.01 * (g + rho / (g - 1)) / np.sqrt(t)) * off * (1 + noise * rng.standard_normal()) for g, _, off in rows]
    g, s, _ = zip(*rows)
    return list(g), [48] * len(g), list(s), y


def test_a_g_star_that_stays_put_is_consistent_with_universality_in_time():
    fits, uni = fit_over_time(*table(lambda t: 4.0), n_boot=100)
    assert [round(fits[t].g_star) for t in STEPS] == [4, 4, 4]
    assert uni.rejected is False and uni.slope_ci95[0] < 0 < uni.slope_ci95[1] and "consistent" in uni.message


def test_a_g_star_that_grows_with_t_is_rejected_with_its_direction():
    fits, uni = fit_over_time(*table(lambda t: {10: 3.0, 20: 5.0, 40: 9.0}[t]), n_boot=100)
    assert fits[10].g_star == pytest.approx(3.0, rel=0.15) and fits[40].g_star == pytest.approx(9.0, rel=0.15)
    assert uni.rejected is True and uni.slope > 0.5 and uni.slope_ci95[0] > 0 and "grows" in uni.message
    assert [f.step for f in step_fits(fits)] == STEPS


def test_one_checkpoint_gives_no_test():
    g, b, s, y = table(lambda t: 4.0)
    fits, uni = fit_over_time(g, b, s, {40: y[40]}, n_boot=20)
    assert uni is None and fits[40].status == "ok"
