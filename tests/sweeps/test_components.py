"""The variance law's G* and predicted MSE (sweeps.components) against values computed by hand."""

import math

import pytest

from sweeps.components import VarianceComponents

C = VarianceComponents(tau2=2.0, sigma2=3.0, kappa=8.0)


def test_g_star_is_one_plus_the_root_of_kappa_over_tau2():
    assert C.g_star == pytest.approx(3.0)  # 1 + sqrt(8 / 2)
    assert VarianceComponents(tau2=0.5, sigma2=0.0, kappa=2.0).g_star == pytest.approx(3.0)
    assert VarianceComponents(tau2=0.0, sigma2=1.0, kappa=1.0).g_star == math.inf
    assert VarianceComponents(tau2=-1.0, sigma2=1.0, kappa=1.0).g_star == math.inf
    assert VarianceComponents(tau2=1.0, sigma2=1.0, kappa=-4.0).g_star == 1.0  # a negative estimate is no excess


@pytest.mark.parametrize(("g", "b", "mse"), [(2, 12, (4 + 3 + 8) / 12), (3, 12, (6 + 3 + 4) / 12), (6, 24, (12 + 3 + 1.6) / 24)])
def test_the_predicted_mse_is_the_law_at_g_and_b(g, b, mse):
    assert C.gradient_mse(g, b) == pytest.approx(mse, rel=1e-12)


def test_the_predicted_mse_is_least_at_g_star():
    mse = {g: C.gradient_mse(g, 24) for g in (2, 3, 4, 6)}
    assert min(mse, key=mse.get) == 3


def test_a_group_of_one_has_no_leave_one_out_baseline():
    with pytest.raises(ValueError, match=r"group_size \(G\) must be >= 2, got 1"):
        C.gradient_mse(1, 12)
    assert C.gradient_mse(2, 12) > 0
