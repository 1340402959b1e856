"""The evidence and interval code of sweeps.law, checked against hand computations.

The F-tests against scipy.stats.f with the textbook formula, the evidence levels at their thresholds
(WEAK_R2, WIDE_CI, LAW_VS_FLAT_ALPHA) with the reasons users read, the percentile interval on
hand-made draws, the two bootstraps' resampling schemes (THEORY.md "Evidence and units") and the
TIE_SHARE boundary of the indistinguishable group sizes.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from sweeps import law
from sweeps.law import (
    BudgetFit,
    _aggregate_all,
    _bootstrap_ci,
    _design,
    _equivalent,
    _percentile_ci,
    _point_estimate,
    _Points,
    _shared_rho,
    _slope_rss,
)

GRID = [2, 3, 4, 6, 8, 12, 16]
NAN7 = np.full(7, np.nan)


def points(g, values, sd=None):
    """A budget's _Points from per-seed values by hand; weights 1 / sqrt(sd^2 / n) from per-seed sds (unit sd: w = sqrt(n))."""
    values = tuple(np.asarray(v, dtype=float) for v in values)
    n = np.array([v.size for v in values])
    sd = np.ones(n.size) if sd is None else np.asarray(sd, dtype=float)
    nan = np.full(n.size, np.nan)
    return _Points(np.asarray(g, dtype=float), np.array([v.mean() for v in values]), nan, n, np.sqrt(n) / sd, values, nan)


def table(laws, seeds=3, noise=0.03, rng_seed=0):
    """Columns (g, b, y) of ``seeds`` trials per G in GRID at each budget B of ``laws`` {B: gap(G)}, relative noise."""
    rng = np.random.default_rng(rng_seed)
    rows = [(g, b, f(g) * (1 + noise * rng.standard_normal())) for b, f in laws.items() for g in GRID for _ in range(seeds)]
    g, b, y = (np.array(c) for c in zip(*rows))
    return g.astype(float), b, y


def aggregate(laws, **kw):
    g, b, y = table(laws, **kw)
    return _aggregate_all(g, b, y, np.full(g.size, np.nan))[0]


def wls(x, y, w):
    """Weighted least squares by numpy: (coefficients, sum w^2 (y - x coef)^2)."""
    coef = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)[0]
    return coef, float((w**2 * (y - x @ coef) ** 2).sum())


def flat_rss(y, w):
    """sum w^2 (y - ybar)^2 with the weighted mean ybar (weights w^2)."""
    return float((w**2 * (y - (w**2 @ y) / (w**2).sum()) ** 2).sum())


UNIVERSAL = {48: lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), 96: lambda g: 0.1 + 0.005 * g + 0.045 / (g - 1)}  # G* = 4 at both


# --- the law against a constant ------------------------------------------------------------------


def _textbook_f(data):
    """F = ((RSS_flat - RSS_law) / 2k) / (RSS_law / (n - 3k)) over k budgets, n points; each by lstsq."""
    rss_law = rss_flat = 0.0
    for p in data.values():
        coef, r = wls(_design(p.g), p.y, p.w)
        assert (coef[1:] > 0).all()  # b, c > 0: the unconstrained fit is the constrained one
        rss_law, rss_flat = rss_law + r, rss_flat + flat_rss(p.y, p.w)
    k, n = len(data), sum(p.g.size for p in data.values())
    f = ((rss_flat - rss_law) / (2 * k)) / (rss_law / (n - 3 * k))
    return f, stats.f.sf(f, 2 * k, n - 3 * k)


def _one_seed(g, eps):
    """One seed per point (unit weights), the law G* = 4 plus residuals eps."""
    g = np.asarray(g, dtype=float)
    y = 0.2 + 0.01 * g + 0.09 / (g - 1) + np.asarray(eps)
    return _aggregate_all(g, np.full(g.size, 48), y, np.full(g.size, np.nan))[0]


@pytest.mark.parametrize(
    "data",
    [
        aggregate(UNIVERSAL),  # k = 2, n = 14: df (4, 8); the noise model (beta 1.7) weights the points unequally
        _one_seed([2, 4, 8, 16], [0.003, -0.004, 0.002, 0.001]),  # 4 group sizes: df (2, 1), the fewest that test
        _one_seed(GRID, 1e-6 * np.array([3, -2, 4, -1, 0, -3, 2])),  # residuals 1e-6 of the metric: still a finite F
    ],
    ids=["two budgets, noise-model weights", "df2 = 1", "tiny residuals"],
)
def test_the_law_against_a_constant_is_the_weighted_textbook_f_test(data):
    """_law_vs_flat's (F, p) equal the nested-model F-test computed here with numpy and scipy.stats.f."""
    f_hand, p_hand = _textbook_f(data)
    f_stat, p = law._law_vs_flat(data)
    assert math.isfinite(f_hand) and f_stat == pytest.approx(f_hand, rel=1e-7)
    assert p == pytest.approx(p_hand, rel=1e-6)


def test_no_law_against_a_constant_without_a_usable_budget():
    """Only a 3-G budget (unusable): no budget leaves a residual degree of freedom, so there is no test."""
    assert law._law_vs_flat({96: points([2, 4, 8], [[0.3], [0.25], [0.28]])}) is None


# --- the evidence levels ---------------------------------------------------------------------------

STRONG = "the law beats a constant ({}), explains most of the variation and pins G* within the grid"
NONE = "the law does not fit better than a constant ({}): G may not matter here, or noise hides it; add seeds or steps"
WIDE = "the interval of G* [3, 10] spans more than half the grid (in log G)"
EDGE = "G* lies at the edge of the grid, so it has no interval"


@pytest.mark.parametrize(
    ("test", "r2s", "ci", "grid", "boundary", "want"),
    [
        # p at the level does not beat the constant; just above neither
        ((3.0, 0.05), (0.9,), (3, 8), (2, 16), False, ("none", NONE.format("F = 3, p = 0.05"))),
        ((2.9, 0.0501), (0.9,), (3, 8), (2, 16), False, ("none", NONE.format("F = 2.9, p = 0.05"))),
        # just below: strong, with R^2 at WEAK_R2 (not below it) and log(8/3) = 0.98 < 0.5 log(16/2) = 1.04
        ((3.2, 0.0499), (0.5,), (3, 8), (2, 16), False, ("strong", STRONG.format("F = 3.2, p = 0.05"))),
        ((math.inf, 0.0), (0.9, None), (3, 8), (2, 16), False, ("strong", STRONG.format("F = inf"))),  # r2 None: not weak
        # an interval of exactly half the grid in log G is not more than half: log(6/3) = 0.5 log(16/4)
        ((9.0, 1e-4), (0.9,), (3, 6), (4, 16), False, ("strong", STRONG.format("F = 9, p = 0.0001"))),
        ((9.0, 1e-4), (0.9, 0.49), (3, 8), (2, 16), False, ("weak", "R2 = 0.49 at B = 96")),
        ((9.0, 1e-4), (0.9,), (3, 10), (2, 16), False, ("weak", WIDE)),  # log(10/3) = 1.20 > 1.04
        ((9.0, 1e-4), (0.9,), None, (2, 16), False, ("weak", "G* has no interval")),
        ((9.0, 1e-4), (0.3,), (2.5, None), (2, 16), False, ("weak", "R2 = 0.30 at B = 48; the interval of G* is open")),
        ((9.0, 1e-4), (0.3,), None, (2, 16), True, ("weak", "R2 = 0.30 at B = 48; " + EDGE)),
    ],
)
def test_the_evidence_levels_at_their_thresholds_with_their_reasons(monkeypatch, test, r2s, ci, grid, boundary, want):
    """_evidence with the law-vs-constant test fixed to (F, p): none at p >= 0.05, weak at R^2 < 0.5 or an
    interval missing, open or wider than half the grid in log G, strong otherwise."""
    monkeypatch.setattr(law, "_law_vs_flat", lambda data: test)
    usable = [BudgetFit(samples_per_step=b, status="ok", r2=r2) for b, r2 in zip((48, 96), r2s)]
    assert law._evidence({}, usable, None if ci is None else list(ci), *grid, boundary) == want


def test_no_evidence_when_the_law_cannot_be_tested_and_4_group_sizes_suffice():
    """No usable budget: no F-test, and the reason names the least number of G that gives one (4: df2 = 4 - 3)."""
    level, reason = law._evidence({}, [], [3.0, 8.0], 2, 16, False)
    assert (level, reason) == (
        "none",
        "too few group sizes per budget to test the law against a constant (need at least 4 distinct G at a budget)",
    )
    four = points([2, 4, 8, 16], [[0.5, 0.6], [0.3, 0.35], [0.32, 0.3], [0.4, 0.45]])
    assert law._law_vs_flat({48: four}) is not None


# --- one G* across budgets -------------------------------------------------------------------------


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
    uni = _point_estimate(data)[1]
    rss_shared = lambda rho: sum(_one_slope_rss(p.g + rho / (p.g - 1), p.y, p.w) for p in data.values())  # noqa: E731
    assert rss_shared(uni.rho) <= min(rss_shared(uni.rho * 0.99), rss_shared(uni.rho * 1.01))
    rss_sep = sum(wls(_design(p.g), p.y, p.w)[1] for p in data.values())
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
    uni = _point_estimate(aggregate(UNIVERSAL, noise=0.0))[1]
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
            assert _shared_rho(budgets, 16.0)[0] == want


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
        got = _slope_rss(z, y, w)
    syy = flat_rss(y, w)
    assert got[0] == pytest.approx(wls(np.stack([np.ones(7), shape], 1), y, w)[1], rel=1e-9)  # rising: slope free
    assert got[1] == pytest.approx(syy, rel=1e-12) and got[2] == pytest.approx(syy, rel=1e-12)
    assert 0.0 <= got[3] <= syy * (1 + 1e-12)


# --- the noise model's weights ---------------------------------------------------------------------


def test_the_noise_model_weights_each_point_by_its_seeds_minus_one():
    """Unequal seeds per G (2 to 6): the variance function is the weighted regression of log var on log |mean| with
    weights dof = seeds - 1 (numpy polyfit here), alpha their weighted mean of log var - beta log |mean|."""
    rng = np.random.default_rng(1)
    seeds = [2, 6, 3, 2, 5, 3, 2]
    g = np.repeat(np.array(GRID, dtype=float), seeds)
    y = 0.05 * g + 0.02 * np.sqrt(0.05 * g) * rng.standard_normal(g.size)  # var proportional to the mean: beta 1
    _, noise = _aggregate_all(g, np.full(g.size, 48), y, np.full(g.size, np.nan))
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
    data, noise = _aggregate_all(g, np.full(7, 48), 0.2 + 0.01 * g + 0.09 / (g - 1), se)
    fill = 1 / math.sqrt(7.5e-6)
    assert noise is None
    np.testing.assert_allclose(data[48].w, [500, fill, fill, 250, 1000, fill, 1 / 0.003], rtol=1e-12)


# --- the bootstraps --------------------------------------------------------------------------------


def _record(monkeypatch):
    """Replace _g_star_raw by a recorder of the resampled data that answers G* = 3."""
    seen = []
    monkeypatch.setattr(law, "_g_star_raw", lambda boot: seen.append(boot) or 3.0)
    return seen


def _standardised(seen, data):
    """The resampled seeds' deviations from their point's mean in units of the point's sd, all resamples."""
    out = []
    for boot in seen:
        for b, p in boot.items():
            for i, v in enumerate(p.values):
                assert v.size == data[b].n[i] and p.y[i] == pytest.approx(v.mean())
                out.extend((v - data[b].y[i]) / (np.sqrt(data[b].n[i]) / data[b].w[i]))
    return np.array(out)


def test_the_seed_bootstrap_draws_each_point_s_seeds_from_the_pooled_standardised_deviations(monkeypatch):
    """THEORY.md: a resampled seed is mean_i + sd_i x d, d drawn from the pool of all replicated points'
    (y_is - mean_i) / sd_i x sqrt(n_i / (n_i - 1)); one-seed points contribute nothing but are resampled."""
    base = 0.2 + 0.01 * np.array(GRID) + 0.09 / (np.array(GRID) - 1.0)
    dev = [[1, -3, 2], [2, -2], [1, 2, -4, 1], [0], [3, -1, -2], [-1, 1], [2, 1, -3]]  # x 1e-3, zero-mean per point
    sd = [0.010, 0.012, 0.009, 0.011, 0.013, 0.010, 0.008]
    data = {48: points(GRID, [m + 1e-3 * np.array(d) for m, d in zip(base, dev)], sd)}
    pool = np.concatenate(
        [1e-3 * np.array(d) / s * math.sqrt(len(d) / (len(d) - 1)) for d, s in zip(dev, sd) if len(d) > 1]
    )  # e.g. G = 2: (1, -3, 2) x 1e-3 / 0.010 x sqrt(3/2) = (0.122, -0.367, 0.245)
    assert np.abs(pool).max() < 1
    seen = _record(monkeypatch)
    assert _bootstrap_ci(data, 40, np.random.default_rng(0)) == ([3.0, 3.0], "", [3.0] * 40)
    assert len(seen) == 40
    got = _standardised(seen, data)
    assert np.isclose(got[:, None], pool[None, :], rtol=0, atol=1e-9).any(axis=1).all()  # every draw is from the pool
    assert np.isclose(pool[:, None], got[None, :], rtol=0, atol=1e-9).any(axis=1).all()  # and 40 x 18 draws hit all 17
    seen.clear()
    assert _bootstrap_ci(data, 1, np.random.default_rng(0)) == ([3.0, 3.0], "", [3.0]) and len(seen) == 1
    assert _bootstrap_ci(data, 0, np.random.default_rng(0)) == (None, "; no interval (n_boot = 0)", [])


def test_one_replicated_point_is_enough_to_pool(monkeypatch):
    """Only G = 4 has two seeds (0.004 apart, sd 0.01): the pool is +-0.002 / 0.01 x sqrt 2, not the residuals."""
    base = 0.2 + 0.01 * np.array(GRID) + 0.09 / (np.array(GRID) - 1.0)
    values = [[m] for m in base]
    values[2] = [base[2] - 0.002, base[2] + 0.002]
    data = {48: points(GRID, values, np.full(7, 0.01))}
    seen = _record(monkeypatch)
    ci, note, _ = _bootstrap_ci(data, 20, np.random.default_rng(0))
    assert ci == [3.0, 3.0] and note == ""
    np.testing.assert_allclose(np.abs(_standardised(seen, data)), 0.2 * math.sqrt(2), rtol=1e-9)


def test_identical_seeds_give_no_interval_and_say_why():
    data = {48: points(GRID, [[m, m, m] for m in (0.31, 0.28, 0.27, 0.278, 0.293, 0.328, 0.366)])}
    assert _bootstrap_ci(data, 50, np.random.default_rng(0)) == (
        None,
        "; no interval: the seeds gave identical values, so there is no noise to resample",
        [],
    )


def _one_seed_budget(g, eps, sd):
    """(g, y, sd, _Points): one seed per G of the law G* = 4 plus residuals eps, per-seed sds sd."""
    g, sd = np.asarray(g, dtype=float), np.asarray(sd, dtype=float)
    y = 0.2 + 0.01 * g + 0.09 / (g - 1) + np.asarray(eps)
    return g, y, sd, points(g, y[:, None], sd)


@pytest.mark.parametrize("budgets", [(48,), (48, 96)], ids=["1 residual dof", "3 residual dofs over two budgets"])
def test_one_seed_per_point_resamples_the_fitted_curve_with_the_residual_sd(monkeypatch, budgets):
    """Parametric bootstrap: y* = fitted + sigma / w x N(0, 1) at each usable budget (one seed: w = 1 / sd),
    sigma^2 = the budgets' weighted RSS / their residual dof (4 G at B = 48: 1, 5 G at B = 96: 2); the 3-G budget
    is left out. Fitted curves and sigma by lstsq here."""
    made = {
        48: _one_seed_budget([2, 4, 8, 16], [0.003, -0.004, 0.002, 0.001], [0.004, 0.002, 0.003, 0.005]),
        96: _one_seed_budget([2, 3, 6, 8, 16], [-0.002, 0.003, 0.001, -0.004, 0.002], [0.003, 0.002, 0.002, 0.004, 0.003]),
    }
    data = {b: made[b][3] for b in budgets} | {192: points([2, 4, 8], [[0.3], [0.25], [0.28]])}
    fitted, rss, dof = {}, 0.0, 0
    for b in budgets:
        g, y, sd, _ = made[b]
        coef, r = wls(_design(g), y, 1 / sd)
        assert (coef[1:] > 0).all()
        fitted[b], rss, dof = _design(g) @ coef, rss + r, dof + g.size - 3
    sigma = math.sqrt(rss / dof)
    seen = _record(monkeypatch)
    note = "; from the residuals (one seed per point)"
    assert _bootstrap_ci(data, 5, np.random.default_rng(1)) == ([3.0, 3.0], note, [3.0] * 5)
    rng = np.random.default_rng(1)
    for boot in seen:
        assert list(boot) == list(budgets)
        for b in budgets:
            want = fitted[b] + sigma * made[b][2] * rng.standard_normal(made[b][0].size)
            np.testing.assert_allclose(boot[b].y, want, rtol=1e-12)


def test_one_seed_per_point_without_a_residual_dof_gives_no_interval(monkeypatch):
    seen = _record(monkeypatch)
    data = {96: points([2, 4, 8], [[0.3], [0.25], [0.28]])}  # 3 G: unusable, no budget leaves a residual
    assert law._residual_bootstrap(data, 10, np.random.default_rng(0)) == (
        None,
        "; no interval: one seed per point and no residual degrees of freedom (add seeds or group sizes)",
        [],
    )
    assert seen == []


# --- the interval and the indistinguishable G --------------------------------------------------------


def test_the_percentile_interval_of_hand_made_draws():
    """40 draws 1..40: numpy's linear percentiles at ranks 0.025 x 39 = 0.975 and 0.975 x 39 = 38.025 give
    1.975 and 39.025. Half the resamples suffice (n_boot // 2); inf draws open the interval."""
    draws = [float(v) for v in range(1, 41)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _percentile_ci(draws, 80) == (pytest.approx([1.975, 39.025], rel=1e-12), "")
        assert _percentile_ci(draws, 81)[0] == pytest.approx([1.975, 39.025], rel=1e-12)  # 40 >= 81 // 2
        assert _percentile_ci(draws[:39], 80) == (None, "; most bootstrap resamples could not be fitted")
        open_note = "; the interval is open above (G* unbounded in some resamples)"
        # 10 of 40 infinite: ranks 38 and 39 are both inf, the upper end is open
        assert _percentile_ci(draws[:30] + [math.inf] * 10, 40) == ([pytest.approx(1.975, rel=1e-12), None], open_note)
        assert _percentile_ci([math.inf] * 40, 40) == ([None, None], open_note)
        # 1 of 40 infinite: rank 38.025 lies between 3 and inf, so the upper end is open (not 3 + 0.025 x 1e307)
        assert _percentile_ci([3.0] * 39 + [math.inf], 40) == ([3.0, None], open_note)
        # 200 draws: rank 0.975 x 199 = 194.025 interpolates ranks 194 and 195; 4 inf draws (196-199) leave it finite
        finite = [float(v) for v in range(1, 201)]
        assert _percentile_ci(finite[:196] + [math.inf] * 4, 200) == ([pytest.approx(5.975), pytest.approx(195.025)], "")
        assert _percentile_ci(finite[:195] + [math.inf] * 5, 200) == ([pytest.approx(5.975), None], open_note)
        # 41 draws: rank 0.975 x 40 = 39 exactly is the draw 40.0, though the next one is inf (not 0 x inf = NaN)
        assert _percentile_ci(finite[:40] + [math.inf], 41) == ([pytest.approx(2.0), 40.0], "")
        assert _percentile_ci([], 1) == (None, "; most bootstrap resamples could not be fitted")
        rng = np.random.default_rng(0)
        shuffled = list(rng.lognormal(1.0, 0.5, 150))
        assert _percentile_ci(shuffled, 200)[0] == pytest.approx(list(np.percentile(shuffled, [2.5, 97.5])), rel=1e-12)


def test_a_g_best_in_2_5_percent_of_the_resamples_is_indistinguishable():
    """G* = 4 is best at G = 4, G* = 8 at G = 8 (shape G + 49/(G-1): 15 at 8, 15.8 at 6, 16.5 at 12).
    1 of 40 resamples is 2.5%, listed; 2 of 100 is 2%, not; 3 of 100 is."""
    assert _equivalent([4.0] * 39 + [8.0], GRID) == [4, 8]
    assert _equivalent([4.0] * 98 + [8.0] * 2, GRID) == [4]
    assert _equivalent([4.0] * 97 + [8.0] * 3, GRID) == [4, 8]
    assert _equivalent([], GRID) == []


def _law_residuals(g, rng, size):
    """A random vector orthogonal to the law's design [1, G, 1/(G-1)] (numpy lstsq): added to a shared-rho law it
    leaves rho the exact minimiser of the shared RSS, since the shared model is nested in the law per budget."""
    x = _design(g)
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
    An exact optimum 10.5 tolerances (_RHO_XATOL = 1e-6 in log rho) below the end is found, with the RSS of the law
    per budget (the residuals' weighted sum of squares); 9.5 tolerances below it counts as the end: unbounded."""
    end = math.log(9.0)
    inside = math.exp(end - 10.5e-6)
    budgets = _shared_budgets(inside)
    floor = sum(wls(_design(g), y, w)[1] for g, y, w in budgets)
    rho, rss = _shared_rho(budgets, 0.3)
    assert rho == pytest.approx(inside, rel=1e-7) and rss == pytest.approx(floor, rel=1e-9, abs=0)
    assert _shared_rho(_shared_budgets(math.exp(end - 9.5e-6)), 0.3)[0] == math.inf


def test_the_shared_rho_search_starts_at_1e_minus_6():
    """Budgets gap = a + s (G - 50/(G-1)) (rho = -50, below any search): the shared RSS grows with rho from 0 on (by
    1.4e-14 of itself per 1e-7 in log rho at 1e-6, far above rounding), so the best rho the search can give is the start
    of its range, 1e-6 exactly, with the RSS there (by numpy here), not a point the refinement reached near it."""
    g = np.array(GRID, dtype=float)
    budgets = [(g, 0.2 + 0.01 * (g - 50 / (g - 1)), np.ones(7)), (g, 0.1 + 0.03 * (g - 50 / (g - 1)), np.full(7, 2.0))]
    rho, rss = _shared_rho(budgets, 16.0)
    assert rho == pytest.approx(1e-6, rel=1e-12, abs=0)
    assert rss == pytest.approx(sum(_one_slope_rss(g + 1e-6 / (g - 1), y, w) for _, y, w in budgets), rel=1e-9, abs=0)


@pytest.mark.parametrize("ci", [(None, 8.0), (3.0, None), (None, None)], ids=["open below", "open above", "open both"])
def test_an_interval_open_at_either_end_is_weak_evidence(monkeypatch, ci):
    """_evidence: a missing bound at either end (None) is an open interval, weak evidence, whatever the other end is;
    no width is computed from it."""
    monkeypatch.setattr(law, "_law_vs_flat", lambda data: (9.0, 1e-4))
    usable = [BudgetFit(samples_per_step=48, status="ok", r2=0.9)]
    assert law._evidence({}, usable, list(ci), 2, 16, False) == ("weak", "the interval of G* is open")


def test_a_fit_whose_upper_rank_lands_on_the_last_finite_draw_is_ok():
    """n_boot = 41 puts the 97.5% rank on draw 39 exactly; with an unbounded resample after it the fit was
    fit_failed ("the fit overflowed") from a NaN bound. It is a fit like those with n_boot 40 and 42."""
    rng = np.random.default_rng(1)
    g = [g for g in GRID for _ in range(3)]
    y = [0.2 + 0.001 * (x + 81 / (x - 1)) + 0.008 * rng.standard_normal() for x in g]
    seeds = [s for _ in GRID for s in range(3)]
    fits = {n: law.fit_law(g, [48] * len(g), seeds, y, n_boot=n, random_state=0) for n in (40, 41, 42)}
    assert {n: f.status for n, f in fits.items()} == {40: "ok", 41: "ok", 42: "ok"}
    assert fits[41].g_star == fits[40].g_star and all(v is None or math.isfinite(v) for v in fits[41].g_star_ci95)
