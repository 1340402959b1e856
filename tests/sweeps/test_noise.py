"""The noise model's pieces directly: replicate statistics against numpy, the dof-weighted fit against its closed form,
the pooled fallback's rules (fewer than 3 usable points, no spread in |mean|) and the TINY cut-offs."""

import math
import warnings

import numpy as np
import pytest

from sweeps.noise import TINY, fit_noise, replicate_stats


def test_replicate_stats_are_numpy_means_ddof1_variances_and_seeds_minus_one():
    """Means, sample variances (ddof=1) and dof = seeds - 1, per group; a one-seed group has variance nan and dof 0.
    Expected values from numpy directly and by hand (variance of [1, 2, 4]: mean 7/3, squares 16/9 + 1/9 + 25/9 over 2 = 7/3)."""
    groups = [np.array([1.0, 2.0, 4.0]), np.array([5.0]), np.array([-2.0, 0.5]), np.array([3.0, 3.0, 3.0, 7.0])]
    means, var, dof = replicate_stats(groups)
    assert isinstance(means, np.ndarray) and means.shape == (4,)
    assert means == pytest.approx([7 / 3, 5.0, -0.75, 4.0], rel=1e-15)
    assert var[0] == pytest.approx(7 / 3, rel=1e-15)
    assert math.isnan(var[1])
    assert var[2] == pytest.approx(np.var([-2.0, 0.5], ddof=1), rel=1e-15) and var[2] == pytest.approx(3.125, rel=1e-15)
    assert var[3] == pytest.approx(4.0, rel=1e-15)  # deviations -1, -1, -1, 3: (1 + 1 + 1 + 9) / 3
    assert isinstance(dof, np.ndarray) and dof.tolist() == [2.0, 0.0, 1.0, 3.0]


def test_replicate_stats_of_single_seed_groups_emit_no_numpy_warning():
    """A sweep with one seed per point is ordinary: its variances are nan by rule, not by a 0-dof numpy division
    (which would warn "Degrees of freedom <= 0" on every call)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        means, var, dof = replicate_stats([np.array([2.0]), np.array([3.0])])
    assert means.tolist() == [2.0, 3.0] and np.isnan(var).all() and dof.tolist() == [0.0, 0.0]


def _weighted_fit(m, v, w):
    """Weighted least squares of log v on log |m| in closed form: slope = cov_w / var_w, intercept = weighted mean residual."""
    x, y = np.log(np.abs(m)), np.log(v)
    xb, yb = np.average(x, weights=w), np.average(y, weights=w)
    beta = np.sum(w * (x - xb) * (y - yb)) / np.sum(w * (x - xb) ** 2)
    return yb - beta * xb, beta


def test_three_points_are_enough_for_the_weighted_power_law_fit():
    """Exactly 3 usable points with spread in |mean| take the regression (not the pooled fallback); weights are the dof.
    Expected alpha, beta from the weighted least-squares closed form; the noisy variances keep beta inside (0, 2)."""
    m, v, w = np.array([0.5, -2.0, 4.0]), np.array([0.3, 1.1, 2.9]), np.array([2.0, 5.0, 1.0])
    alpha, beta = _weighted_fit(m, v, w)
    assert 0.2 < beta < 1.8
    got = fit_noise(m, v, w)
    assert got.alpha == pytest.approx(alpha, rel=1e-12) and got.beta == pytest.approx(beta, rel=1e-12)
    # unweighted would differ: the weights matter
    assert abs(_weighted_fit(m, v, np.ones(3))[1] - beta) > 0.01


def test_an_exact_power_law_is_recovered_from_three_points():
    """var = exp(-1) |mean|^1 exactly at 3 points: alpha = -1, beta = 1 (by construction)."""
    m = np.array([0.2, 1.0, 5.0])
    got = fit_noise(m, math.exp(-1.0) * np.abs(m), np.array([2.0, 2.0, 3.0]))
    assert got.alpha == pytest.approx(-1.0, abs=1e-12) and got.beta == pytest.approx(1.0, abs=1e-12)


def test_two_points_pool_the_variance_even_with_spread_in_mean():
    """Fewer than 3 usable points: beta = 0 and exp(alpha) = dof-weighted pooled variance
    (0.5 * 2 + 2.0 * 4) / (2 + 4) = 1.5, although the two points alone would fit a slope of 1 exactly."""
    got = fit_noise(np.array([1.0, 4.0]), np.array([0.5, 2.0]), np.array([2.0, 4.0]))
    assert got.beta == 0.0
    assert got.alpha == pytest.approx(math.log(1.5), rel=1e-14)


def test_one_point_pools_to_its_own_variance_whatever_its_dof():
    """A single usable point: exp(alpha) is its variance (dof cancels), beta = 0."""
    got = fit_noise(np.array([3.0, 2.0]), np.array([0.8, np.nan]), np.array([4.0, 0.0]))
    assert got.beta == 0.0 and got.alpha == pytest.approx(math.log(0.8), rel=1e-14)


def test_no_spread_in_mean_pools_the_variance():
    """4 points with the same |mean| (signs differ): no slope to fit, beta = 0, exp(alpha) = (1*1 + 3*2 + 2*4 + 1*0.5) / 7."""
    got = fit_noise(np.array([2.0, -2.0, 2.0, -2.0]), np.array([1.0, 2.0, 4.0, 0.5]), np.array([1.0, 3.0, 2.0, 1.0]))
    assert got.beta == 0.0 and got.alpha == pytest.approx(math.log(15.5 / 7), rel=1e-14)


def test_variances_and_means_at_tiny_carry_no_information():
    """Points whose variance or |mean| is exactly TINY (or below) are left out like nan ones: with none left, None;
    with one left, its own variance."""
    assert fit_noise(np.array([1.0]), np.array([TINY]), np.array([2.0])) is None
    assert fit_noise(np.array([TINY]), np.array([1.0]), np.array([2.0])) is None
    assert fit_noise(np.array([-TINY, 0.0]), np.array([1.0, 1.0]), np.array([2.0, 2.0])) is None
    assert fit_noise(np.array([1.0]), np.array([np.nan]), np.array([0.0])) is None
    got = fit_noise(np.array([1.0, 2.0, TINY, 4.0]), np.array([TINY, 0.7, 3.0, np.inf]), np.array([2.0, 2.0, 2.0, 2.0]))
    assert got.beta == 0.0 and got.alpha == pytest.approx(math.log(0.7), rel=1e-14)
