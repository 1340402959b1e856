"""sweeps.fit.points: the noise model's weights of the seed-averaged points (THEORY.md "Fitting rules")."""

import math

import numpy as np
import pytest

from sweeps.fit.points import aggregate_all
from tests.sweeps.fit.helpers import GRID


def test_the_noise_model_weights_each_point_by_its_seeds_minus_one():
    """Unequal seeds per G (2 to 6): the variance function is the weighted regression of log var on log |mean| with
    weights dof = seeds - 1 (numpy polyfit here), alpha their weighted mean of log var - beta log |mean|."""
    rng = np.random.default_rng(1)
    seeds = [2, 6, 3, 2, 5, 3, 2]
    g = np.repeat(np.array(GRID, dtype=float), seeds)
    y = 0.05 * g + 0.02 * np.sqrt(0.05 * g) * rng.standard_normal(g.size)  # var proportional to the mean: beta 1
    _, noise = aggregate_all(g, np.full(g.size, 48), y, np.full(g.size, np.nan))
    groups = [y[g == v] for v in GRID]
    lm = np.log(np.abs([v.mean() for v in groups]))
    lv = np.log([v.var(ddof=1) for v in groups])
    dof = np.array(seeds) - 1.0
    beta = np.polyfit(lm, lv, 1, w=np.sqrt(dof))[0]  # polyfit's w multiplies the residuals: sqrt of the weights
    assert 0 < beta < 2  # not clipped
    assert noise.beta == pytest.approx(beta, rel=1e-9)
    assert noise.alpha == pytest.approx(np.average(lv - beta * lm, weights=dof), rel=1e-9)


def test_with_one_seed_the_measurement_errors_alone_weight_the_points():
    """No replicates: w = 1 / se of each point's own measurement; where it is unknown (NaN) or zero, the mean
    of the known se^2 stands in: (2^2 + 4^2 + 1^2 + 3^2) / 4 = 7.5 (x 1e-6)."""
    g = np.array(GRID, dtype=float)
    se = np.array([0.002, 0.0, np.nan, 0.004, 0.001, np.nan, 0.003])
    data, noise = aggregate_all(g, np.full(7, 48), 0.2 + 0.01 * g + 0.09 / (g - 1), se)
    fill = 1 / math.sqrt(7.5e-6)
    assert noise is None
    np.testing.assert_allclose(data[48].w, [500, fill, fill, 250, 1000, fill, 1 / 0.003], rtol=1e-12)
