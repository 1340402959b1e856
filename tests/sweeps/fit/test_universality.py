"""sweeps.fit.universality against hand computations: the F-test of one rho against one per budget, the shared-rho
search's range and tolerance, and the one-slope fit it runs on."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from sweeps.fit.curve import design, slope_rss
from sweeps.fit.universality import shared_rho
from tests.sweeps.fit.helpers import GRID, UNIVERSAL, aggregate, flat_rss, universality_of, wls


def _one_slope_rss(z, y, w):
    """Weighted RSS of y = a + s z with s >= 0: the least squares slope, or the constant when it is negative."""
    coef, r = wls(np.stack([np.ones_like(z), z], 1), y, w)
    return r if coef[1] >= 0 else flat_rss(y, w)


@pytest.mark.parametrize(
    ("laws", "rejected"),
    [
        ({**UNIVERSAL, 192: lambda g: 0.05 + 0.0025 * g + 0.0225 / (g - 1)}, False),  # k = 3, n = 21: df (2, 12)
        ({48: lambda g: 0.2 + 0.01 * g + 0.04 / (g - 1), 96: lambda g: 0.1 + 0.01 * g + 0.49 / (g - 1)}, True),  # df (1, 8)
    ],
    ids=["shared G* at three budgets", "G* 3 and 8"],
)
def test_universality_is_the_textbook_f_test_of_one_rho_against_one_per_budget(laws, rejected):
    """F = ((RSS_shared - RSS_sep) / (k - 1)) / (RSS_sep / (n - 3k)) over k budgets and n points, with RSS_shared
    at the reported rho (its minimiser) and RSS_sep of the law per budget, both by numpy here."""
    data = aggregate(laws)
    uni = universality_of(data)
    rss_shared = lambda rho: sum(_one_slope_rss(p.g + rho / (p.g - 1), p.y, p.w) for p in data.values())  # noqa: E731
    assert rss_shared(uni.rho) <= min(rss_shared(uni.rho * 0.99), rss_shared(uni.rho * 1.01))
    rss_sep = sum(wls(design(p.g), p.y, p.w)[1] for p in data.values())
    k, n = len(data), 7 * len(data)
    f = ((rss_shared(uni.rho) - rss_sep) / (k - 1)) / (rss_sep / (n - 3 * k))
    p = stats.f.sf(f, k - 1, n - 3 * k)
    assert uni.shared_g_star == pytest.approx(1 + math.sqrt(uni.rho), rel=1e-12)
    assert uni.f_statistic == pytest.approx(f, rel=1e-6) and uni.p_value == pytest.approx(p, rel=1e-5)
    assert uni.rejected is rejected and bool(p < 0.05) is rejected
    if rejected:
        assert uni.message == f"separate G* per budget fit significantly better (F={f:.3g}, p={p:.3g})"
    else:
        assert uni.shared_g_star == pytest.approx(4.0, abs=0.5)
        assert uni.message == f"one G* across budgets is consistent with the data (F={f:.3g}, p={p:.3g})"


def test_noise_free_budgets_have_no_universality_test_but_a_shared_g_star():
    """RSS_sep = 0: nothing to compare with, so no F; rho = 9 (G* = 4) is still found."""
    uni = universality_of(aggregate(UNIVERSAL, noise=0.0))
    assert (uni.f_statistic, uni.p_value, uni.rejected) == (None, None, None)
    assert uni.message == "too few points per budget for the F-test"
    assert uni.rho == pytest.approx(9.0, rel=1e-6) and uni.shared_g_star == pytest.approx(4.0, rel=1e-6)


def test_the_shared_rho_search_ends_at_10_g_max_squared():
    """Noise-free budgets sharing rho: 20000 (G* = 142) and 25000 are found; 26000, beyond (10 x 16)^2 = 25600, is unbounded.
    The search warns about nothing (e.g. an unknown optimiser option)."""
    g = np.array(GRID, dtype=float)
    shape = lambda rho: g + rho / (g - 1)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # 25000 lies in the last grid cell (the grid's minimum is its end point): refined, not read as unbounded
        for rho, want in [
            (20000.0, pytest.approx(20000.0, rel=1e-4)),
            (25000.0, pytest.approx(25000.0, rel=1e-4)),
            (26000.0, math.inf),
        ]:
            budgets = [(g, 0.2 + 0.01 * shape(rho), np.ones(7)), (g, 0.1 + 0.03 * shape(rho), np.full(7, 2.0))]
            assert shared_rho(budgets, 16.0)[0] == want


def test_the_one_slope_fit_is_unit_free_and_a_constant_regressor_adds_nothing():
    """RSS of y on 1e-5 z equals that on z; a constant regressor (0, or negative) gives RSS = Syy, the fit with
    s = 0, and a nearly constant falling one never more than Syy; no division warnings."""
    rng = np.random.default_rng(3)
    g = np.array(GRID, dtype=float)
    y, w = 0.2 * g + rng.normal(0, 0.3, g.size), rng.uniform(0.5, 2.0, g.size)
    shape = g + 4.0 / (g - 1)
    z = np.stack([1e-5 * shape, np.zeros(7), np.full(7, -5.0), 1e6 - 1e-4 * g])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = slope_rss(z, y, w)
    syy = flat_rss(y, w)
    assert got[0] == pytest.approx(wls(np.stack([np.ones(7), shape], 1), y, w)[1], rel=1e-9)  # rising: slope free
    assert got[1] == pytest.approx(syy, rel=1e-12) and got[2] == pytest.approx(syy, rel=1e-12)
    assert 0.0 <= got[3] <= syy * (1 + 1e-12)


def _law_residuals(g, rng, size):
    """A random vector orthogonal to the law's design [1, G, 1/(G-1)] (numpy lstsq): added to a shared-rho law it
    leaves rho the exact minimiser of the shared RSS, since the shared model is nested in the law per budget."""
    x = design(g)
    r = rng.standard_normal(g.size)
    return size * (r - x @ np.linalg.lstsq(x, r, rcond=None)[0])


def _shared_budgets(rho, rng_seed=0):
    g = np.array(GRID, dtype=float)
    rng = np.random.default_rng(rng_seed)
    z = g + rho / (g - 1)
    return [
        (g, 0.2 + 0.01 * z + _law_residuals(g, rng, 0.002), np.ones(7)),
        (g, 0.1 + 0.03 * z + _law_residuals(g, rng, 0.002), np.full(7, 2.0)),
    ]


def test_the_shared_rho_is_unbounded_only_within_10_tolerances_of_the_search_s_end():
    """g_max = 0.3: the search ends at rho = (10 x 0.3)^2 = 9, where the data on G = 2..16 pin log rho to ~1e-8.
    An exact optimum 10.5 tolerances (RHO_XATOL = 1e-6 in log rho) below the end is found, with the RSS of the law
    per budget (the residuals' weighted sum of squares); 9.5 tolerances below it counts as the end: unbounded."""
    end = math.log(9.0)
    inside = math.exp(end - 10.5e-6)
    budgets = _shared_budgets(inside)
    floor = sum(wls(design(g), y, w)[1] for g, y, w in budgets)
    rho, rss = shared_rho(budgets, 0.3)
    assert rho == pytest.approx(inside, rel=1e-7) and rss == pytest.approx(floor, rel=1e-9, abs=0)
    assert shared_rho(_shared_budgets(math.exp(end - 9.5e-6)), 0.3)[0] == math.inf


def test_the_shared_rho_search_starts_at_1e_minus_6():
    """Budgets gap = a + s (G - 50/(G-1)) (rho = -50, below any search): the shared RSS grows with rho from 0 on (by
    1.4e-14 of itself per 1e-7 in log rho at 1e-6, far above rounding), so the best rho the search can give is the start
    of its range, 1e-6 exactly, with the RSS there (by numpy here), not a point the refinement reached near it."""
    g = np.array(GRID, dtype=float)
    budgets = [(g, 0.2 + 0.01 * (g - 50 / (g - 1)), np.ones(7)), (g, 0.1 + 0.03 * (g - 50 / (g - 1)), np.full(7, 2.0))]
    rho, rss = shared_rho(budgets, 16.0)
    assert rho == pytest.approx(1e-6, rel=1e-12, abs=0)
    assert rss == pytest.approx(sum(_one_slope_rss(g + 1e-6 / (g - 1), y, w) for _, y, w in budgets), rel=1e-9, abs=0)
