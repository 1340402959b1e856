"""fit_law's reported values against hand computations: coefficients, points, weights, statuses and messages."""

import math

import numpy as np
import pytest

import sweeps.fit.law as law_module
from sweeps.fit import LawFit, fit_law, recommend_group_size
from sweeps.fit.budget import grid_edge
from sweeps.fit.curve import nnls_free_intercept
from sweeps.fit.law import _finite
from sweeps.fit.points import _aggregate, aggregate_all, unusable

GRID = [2, 3, 4, 6, 8, 12, 16]


def law(g):
    """a = 0.2, b = 0.01, c = 0.09: G* = 1 + sqrt(0.09 / 0.01) = 4."""
    return 0.2 + 0.01 * g + 0.09 / (g - 1)


def rows(f, grid=GRID, budget=48, dev=(-0.001, 0.001)):
    """One row per (G, seed): seed s is f(G) + dev[s], so every point's seed mean is exactly f(G)."""
    data = [(g, budget, s, f(g) + d) for g in grid for s, d in enumerate(dev)]
    return [list(c) for c in zip(*data)]


def test_law_data_gives_the_law_s_coefficients_and_the_seed_averaged_points():
    """Seeds at f(G) -/+ 0.001: the means lie on the law, so a, b, c are exact; every point's se is
    sd / sqrt(2) = (0.001 sqrt 2) / sqrt 2 = 0.001, reported in the metric's own units."""
    fit = fit_law(*rows(law), n_boot=20)
    assert (fit.status, fit.metric, fit.maximize, fit.n_rows, fit.n_dropped) == ("ok", "gap", False, 14, 0)
    assert fit.g_star == pytest.approx(4.0, rel=1e-9)
    assert fit.recommended_group_size == 4 and fit.equivalent_group_sizes == [4]
    assert fit.message == "G* = 4; use G = 4"  # strong evidence, one best G: nothing appended
    (b48,) = fit.per_budget
    assert (b48.samples_per_step, b48.status, b48.message) == (48, "ok", "")
    assert (b48.a, b48.b, b48.c) == pytest.approx((0.2, 0.01, 0.09), rel=1e-9)
    assert b48.g_star == pytest.approx(4.0, rel=1e-9) and b48.recommended_group_size == 4
    assert b48.r2 == pytest.approx(1.0, abs=1e-12) and b48.chi2_per_dof == pytest.approx(0.0, abs=1e-12)
    assert [set(p) for p in b48.points] == [{"group_size", "mean", "se", "n_seeds"}] * len(GRID)
    assert [p["group_size"] for p in b48.points] == GRID
    assert [p["mean"] for p in b48.points] == pytest.approx([law(g) for g in GRID], rel=1e-12)  # 0.31 at G = 2
    assert [p["se"] for p in b48.points] == pytest.approx([0.001] * len(GRID), rel=1e-9)
    assert [p["n_seeds"] for p in b48.points] == [2] * len(GRID)


def test_one_seed_per_point_reports_no_se():
    fit = fit_law(*rows(law, dev=(0.0,)), n_boot=0)
    assert [p["se"] for p in fit.per_budget[0].points] == [None] * len(GRID)
    assert [p["n_seeds"] for p in fit.per_budget[0].points] == [1] * len(GRID)


def test_three_seeds_use_the_sample_sd():
    """Seeds at f(G) - 0.003, f(G), f(G) + 0.003: sd (ddof 1) = sqrt(2 * 0.003^2 / 2) = 0.003, se = 0.003 / sqrt 3."""
    fit = fit_law(*rows(law, dev=(-0.003, 0.0, 0.003)), n_boot=0)
    assert [p["se"] for p in fit.per_budget[0].points] == pytest.approx([0.003 / math.sqrt(3)] * len(GRID), rel=1e-9)


def test_maximize_fits_and_reports_the_negated_metric():
    """y = 1 - law(G), maximized: the fitted gap is -y = -0.8 + 0.01 G + 0.09/(G-1); points hold -y too."""
    fit = fit_law(*rows(lambda g: 1 - law(g)), maximize=True, n_boot=20)
    assert fit.status == "ok" and fit.maximize is True and fit.g_star == pytest.approx(4.0, rel=1e-9)
    (b48,) = fit.per_budget
    assert (b48.a, b48.b, b48.c) == pytest.approx((-0.8, 0.01, 0.09), rel=1e-9)
    assert [p["mean"] for p in b48.points] == pytest.approx([law(g) - 1 for g in GRID], rel=1e-12)  # -0.69 at G = 2


@pytest.mark.parametrize(
    ("g", "eps", "y_se", "var"),
    [
        # the None point gets the mean squared gap_se of the others: (1 + 4 + 16) / 3 = 7 (x 1e-6)
        ([2, 3, 4, 6], [0.003, -0.004, 0.002, -0.001], [0.001, 0.002, None, 0.004], [1e-6, 4e-6, 7e-6, 16e-6]),
        ([2, 3, 4, 6, 8], [0.002, -0.003, 0.004, -0.002, 0.001], [0.001, 0.003, 0.002, 0.002, 0.004], None),
    ],
    ids=["4 points", "5 points"],
)
def test_measurement_errors_weight_the_fit_by_one_over_se(g, eps, y_se, var):
    """One seed per point and no replicate variance: weights are 1 / gap_se, and a point without a
    gap_se (None) gets the mean squared gap_se of the others. a, b, c, chi2_per_dof = RSS / (P - 3)
    and the weighted R^2 by hand with weighted least squares (b, c > 0: the constraint is inactive)."""
    g = np.array(g, dtype=float)
    y = law(g) + np.array(eps)
    w = 1 / np.sqrt(np.array(var) if var is not None else np.array(y_se) ** 2)
    x = np.stack([np.ones_like(g), g, 1 / (g - 1)], 1)
    coef = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)[0]
    assert (coef[1:] > 0).all()
    rss = float((w**2 * (x @ coef - y) ** 2).sum())
    ybar = float((w**2 * y).sum() / (w**2).sum())
    tss = float((w**2 * (y - ybar) ** 2).sum())

    n = g.size
    fit = fit_law(g.tolist(), [48] * n, [0] * n, y.tolist(), y_se=y_se, n_boot=0)
    (b48,) = fit.per_budget
    assert b48.status == "ok"
    assert (b48.a, b48.b, b48.c) == pytest.approx(tuple(coef), rel=1e-6)
    assert b48.chi2_per_dof == pytest.approx(rss / (n - 3), rel=1e-6)
    assert b48.r2 == pytest.approx(1 - rss / tss, rel=1e-9)
    # gap_se None everywhere is the same as not giving it: unit weights, the ordinary R^2
    plain = fit_law(g.tolist(), [48] * n, [0] * n, y.tolist(), y_se=[None] * n, n_boot=0).per_budget[0]
    assert plain.r2 == fit_law(g.tolist(), [48] * n, [0] * n, y.tolist(), n_boot=0).per_budget[0].r2
    assert plain.r2 != pytest.approx(b48.r2, rel=1e-3)


def test_weights_from_measurement_errors_with_replicated_identical_seeds():
    """Two identical seeds per point (no replicate variance, no noise model): a point's weight is
    1 / sqrt(meas / n) with meas its seeds' mean squared gap_se and n = 2. Three budgets, each
    weighted with its own points' gap_se; at B = 96 only G = 2 has one, the other points get the
    mean of all known meas: (2 * (4 + 9 + 16 + 36) + 16) / 9 = 146 / 9 (x 1e-6)."""
    grid = [2, 3, 4, 6]
    cols = [], [], [], [], []
    for b in (24, 48, 96):
        for g in grid:
            for s in (0, 1):
                se = 0.001 * g if b < 96 else (0.004 if g == 2 else math.nan)
                for col, v in zip(cols, (g, b, s, law(g) * 48 / b, se)):
                    col.append(v)
    g, b, s, y, y_se = (np.array(c, dtype=float) for c in cols)
    data, noise = aggregate_all(g, b.astype(int), y, y_se)
    assert noise is None and list(data) == [24, 48, 96]
    want = np.sqrt(2 / (0.001 * np.array(grid)) ** 2)
    np.testing.assert_allclose(data[24].w, want, rtol=1e-12)
    np.testing.assert_allclose(data[48].w, want, rtol=1e-12)
    np.testing.assert_allclose(data[96].w, np.sqrt(2 / np.array([16e-6] + [146e-6 / 9] * 3)), rtol=1e-12)


def test_rows_with_a_non_finite_metric_are_counted_and_named_in_the_message():
    g, b, s, y = rows(law)
    y[3], y[8] = math.nan, math.inf
    fit = fit_law(g, b, s, y, metric="loss", n_boot=20)
    assert (fit.status, fit.metric, fit.n_rows, fit.n_dropped) == ("ok", "loss", 14, 2)
    assert fit.message == "G* = 4; use G = 4 (2 rows with a non-finite loss dropped)"


def test_no_usable_rows():
    fit = fit_law([2, 3], [48, 48], [0, 0], [math.nan, -math.inf])
    assert (fit.status, fit.metric, fit.maximize, fit.n_rows, fit.n_dropped) == ("insufficient_data", "gap", False, 2, 2)
    assert fit.message == "no usable rows (2 rows with a non-finite gap dropped)"
    assert (fit.evidence, fit.evidence_reason) == ("none", "no usable rows")


def test_a_metric_up_to_1e100_is_fitted_and_a_larger_one_is_refused():
    """MAX_ABS_METRIC = 1e100 (squares of larger values overflow): exactly 1e100 is fitted; 1e100 (1 + 1e-9) is not."""
    g, b, s, y = rows(law)
    top = max(y)  # law(2) + 0.001 = 0.311
    at_limit = fit_law(g, b, s, [v * 1e100 / top for v in y], n_boot=20)
    assert at_limit.status == "ok" and at_limit.g_star == pytest.approx(4.0, rel=1e-9)
    assert at_limit.per_budget[0].b == pytest.approx(0.01 * 1e100 / top, rel=1e-9)
    y_big = [v * 1.000000001e100 / top for v in y] + [math.nan]
    fit = fit_law(g + [2], b + [48], s + [2], y_big, maximize=True)
    assert (fit.status, fit.metric, fit.maximize, fit.n_rows, fit.n_dropped) == ("fit_failed", "gap", True, 15, 1)
    assert fit.message == "|gap| exceeds 1e+100: rescale it (1 rows with a non-finite gap dropped)"
    assert (fit.evidence, fit.evidence_reason) == ("none", "|gap| exceeds 1e+100: rescale it")
    assert fit.per_budget == [] and fit.recommended_group_size is None


def test_a_constant_metric_is_no_signal_with_its_budget():
    g, b, s, y = rows(lambda g: 0.3, dev=(0.0, 0.0))
    fit = fit_law(g + [2], b + [48], s + [2], y + [math.nan], metric="loss")
    assert (fit.status, fit.n_rows, fit.n_dropped, fit.metric) == ("no_signal", 15, 1, "loss")
    assert fit.message == "loss is the same at every G (1 rows with a non-finite loss dropped)"
    assert (fit.evidence, fit.evidence_reason) == ("none", "loss is the same at every G")
    (b48,) = fit.per_budget
    assert (b48.status, b48.message, len(b48.points)) == ("no_signal", "B=48: the metric is the same at every G", 7)


def test_too_few_group_sizes_at_every_budget_names_each_budget():
    a, c = rows(law, grid=[2, 4], budget=48), rows(law, grid=[2, 4, 8], budget=96)
    fit = fit_law(*[x + z for x, z in zip(a, c)])
    assert (fit.status, fit.n_rows, fit.evidence) == ("insufficient_data", 10, "none")
    want = "B=48: 2 distinct G, the law needs at least 4; B=96: 3 distinct G, the law needs at least 4"
    assert fit.message == want and fit.evidence_reason == want
    assert [(f.samples_per_step, f.status, f.message) for f in fit.per_budget] == [
        (48, "insufficient_data", "B=48: 2 distinct G, the law needs at least 4"),
        (96, "insufficient_data", "B=96: 3 distinct G, the law needs at least 4"),
    ]


def five(g):
    """b = 0.01, c = 0.16: G* = 1 + sqrt(16) = 5; the shape G + 16/(G-1) is 9.33 at 4, 9 at 5, 9.2 at 6."""
    return 0.2 + 0.01 * g + 0.16 / (g - 1)


def test_the_recommendation_is_a_divisor_of_the_budget_when_there_is_one():
    """Grid 2..6 with G* = 5: 5 does not divide 48, so G = 6 (shape 9.2 beats 9.33 at G = 4), overall,
    per budget and as the only equivalent G; at B = 7 no G divides the budget and the grid's best, 5, is used."""
    fit = fit_law(*rows(five, grid=[2, 3, 4, 5, 6], dev=(-0.0005, 0.0, 0.0005)), n_boot=40)
    assert fit.status == "ok" and fit.g_star == pytest.approx(5.0, rel=1e-9)
    assert (fit.recommended_group_size, fit.per_budget[0].recommended_group_size, fit.equivalent_group_sizes) == (6, 6, [6])
    assert fit.message == "G* = 5; use G = 6"
    odd = fit_law(*rows(five, grid=[2, 3, 4, 5, 6], budget=7, dev=(-0.0005, 0.0, 0.0005)), n_boot=40)
    assert (odd.recommended_group_size, odd.per_budget[0].recommended_group_size, odd.equivalent_group_sizes) == (5, 5, [5])
    assert odd.message == "G* = 5; use G = 5"


def test_equivalent_group_sizes_stay_within_the_grid():
    """G* = 5.9 on the grid 2..6 at B = 7 (no G divides it): resamples with G* above 6.48 would prefer
    G = 7 (7 + rho/6 < 6 + rho/5 when rho > 30), which the sweep never ran; only 5 and 6 are listed."""
    rho = 4.9**2
    table = rows(lambda g: 0.2 + 0.01 * (g + rho / (g - 1)), grid=[2, 3, 4, 5, 6], budget=7, dev=(-0.004, 0.0, 0.004))
    fit = fit_law(*table, n_boot=40)
    assert fit.status == "ok" and fit.g_star == pytest.approx(5.9, rel=1e-9)
    assert fit.g_star_ci95[1] > 6.48  # some resamples do lie beyond the grid
    assert fit.equivalent_group_sizes == [5, 6]


@pytest.mark.parametrize(
    ("budget", "rec"),
    [(60, 5), (7, 5)],  # B = 60: 6 divides it but lies outside the grid; B = 7: no G of the grid divides it
)
def test_a_boundary_above_recommends_the_grid_s_largest_g(budget, rec):
    """b = 0 (gap = 0.2 + 0.09/(G-1)): larger G always better, G* beyond the grid 2..5."""
    fit = fit_law(*rows(lambda g: 0.2 + 0.09 / (g - 1), grid=[2, 3, 4, 5], budget=budget), n_boot=20)
    assert fit.status == "boundary" and fit.g_star is None
    assert fit.g_star_bound == {"side": "above", "group_size": 5}
    assert fit.recommended_group_size == rec
    (bf,) = fit.per_budget
    assert (bf.status, bf.g_star, bf.recommended_group_size) == ("boundary", None, rec)
    assert bf.message == (
        f"B={budget}: G* is at or above the edge of the grid (5); extend group_sizes above 5 before trusting a recommendation"
    )


def test_a_boundary_below_recommends_g_2_per_budget():
    fit = fit_law(*rows(lambda g: 0.2 + 0.01 * g, grid=[2, 3, 4, 5], budget=60), n_boot=20)
    assert fit.g_star_bound == {"side": "below", "group_size": 2}
    (bf,) = fit.per_budget
    assert (bf.status, bf.recommended_group_size) == ("boundary", 2)
    assert bf.message.startswith("B=60: G* is at or below 2, the smallest group size: use G = 2")


def test_indistinguishable_group_sizes_are_listed_in_the_message():
    """rho = 2 (G* = 2.41): the shape G + 2/(G-1) is 4 at both G = 2 and G = 3."""
    noise = np.random.default_rng(2).normal(0, 0.001, 3 * len(GRID))
    g, b, s, y = rows(lambda g: 0.2 + 0.01 * (g + 2.0 / (g - 1)), dev=(0.0, 0.0, 0.0))
    fit = fit_law(g, b, s, list(np.array(y) + noise), n_boot=60)
    assert fit.status == "ok" and fit.equivalent_group_sizes == [2, 3]
    head = f"G* = {fit.g_star:.3g}; use G = {fit.recommended_group_size}"
    tie = "; G = 2, 3 are indistinguishable here (each is the best G in >= 2.5% of the resamples)"
    assert fit.message.startswith(head + tie)


def test_the_default_bootstrap_is_200_resamples_from_random_state_0():
    g, b, s, y = rows(law, dev=(-0.004, 0.001, 0.003))
    # one resample more, or another seed, moves the percentiles of these draws: equal intervals mean equal settings
    assert fit_law(g, b, s, y).g_star_ci95 == fit_law(g, b, s, y, n_boot=200, random_state=0).g_star_ci95


def test_a_fit_with_nan_or_inf_becomes_fit_failed_keeping_its_header():
    """_finite: the guard behind "never holds NaN or inf"; a finite fit passes unchanged."""
    head = {"metric": "loss", "maximize": True, "n_rows": 9, "n_dropped": 2}
    msg = "the fit overflowed: rescale the metric (values are too large)"
    failed = LawFit(status="fit_failed", message=msg, evidence="none", evidence_reason=msg, **head)
    for bad in (math.nan, math.inf):
        out = _finite(LawFit(status="ok", g_star=bad, recommended_group_size=4, message="G* = ?", **head))
        assert out.model_dump() == failed.model_dump()
    good = LawFit(status="ok", g_star=4.0, recommended_group_size=4, **head)
    assert _finite(good) is good


def test_an_unexpected_numerical_error_is_reported_not_raised(monkeypatch):
    def boom(*args):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(law_module, "_fit", boom)
    g, b, s, y = rows(law)
    fit = fit_law(g + [2], b + [48], s + [2], y + [math.nan], metric="loss", maximize=True)
    assert (fit.status, fit.metric, fit.maximize, fit.n_rows, fit.n_dropped) == ("fit_failed", "loss", True, 15, 1)
    assert fit.message == "LinAlgError: SVD did not converge (1 rows with a non-finite loss dropped)"
    assert (fit.evidence, fit.evidence_reason) == ("none", "the fit failed")


def test_no_overall_g_star_is_fit_failed_with_the_budgets(monkeypatch):
    """The guard for a usable budget without an overall G* (g_star_raw None); its message names the dropped rows as
    every other message does."""
    monkeypatch.setattr(law_module, "g_star_raw", lambda data: None)
    g, b, s, y = rows(law)
    fit = fit_law(g + [2], b + [48], s + [2], y + [math.nan])
    assert (fit.status, fit.metric, fit.n_rows, fit.n_dropped) == ("fit_failed", "gap", 15, 1)
    dropped = " (1 rows with a non-finite gap dropped)"
    assert (fit.message, fit.evidence, fit.evidence_reason) == ("no overall G*" + dropped, "none", "no overall G*")
    assert [f.status for f in fit.per_budget] == ["ok"]


def test_a_g_star_on_a_grid_edge_is_at_the_edge():
    assert grid_edge(2.0, 2, 16) == ("below", 2)
    assert grid_edge(16.0, 2, 16) == ("above", 16)
    assert grid_edge(2.0 + 1e-9, 2, 16) is None and grid_edge(16.0 - 1e-9, 2, 16) is None


def test_no_candidates_is_an_error():
    with pytest.raises(ValueError, match="^no candidate group sizes$"):
        recommend_group_size(4.0, [])


def test_the_noise_model_weights_use_the_first_fit_clipped_to_the_observed_range():
    """Three seeds per G, relative noise 3% (seed 6): the noise model by hand (log var on log |mean|, equal dof 2: the
    slope 2.10 is clipped to 2, alpha the mean of log var - 2 log |mean|); a first weighted fit at the observed means
    (lstsq, b, c > 0); its |fitted values| clipped to [min |mean|, max |mean|]; weights sqrt(3 / var_hat(clipped)).
    Here the first fit lies 1.3% below the smallest and 0.8% above the largest mean, so both clips matter."""
    rng = np.random.default_rng(6)
    grid = np.array(GRID, dtype=float)
    g = np.repeat(grid, 3)
    y = law(g) * (1 + 0.03 * rng.standard_normal(g.size))
    data, noise = aggregate_all(g, np.full(g.size, 48), y, np.full(g.size, np.nan))
    groups = [y[g == v] for v in GRID]
    mean = np.array([v.mean() for v in groups])
    lm, lv = np.log(np.abs(mean)), np.log([v.var(ddof=1) for v in groups])
    assert np.polyfit(lm, lv, 1)[0] > 2
    alpha = float(np.mean(lv - 2 * lm))
    assert (noise.alpha, noise.beta) == (pytest.approx(alpha, rel=1e-12), 2.0)

    def var(m):
        return np.exp(alpha + 2 * np.log(np.abs(m)))

    x = np.stack([np.ones(7), grid, 1 / (grid - 1)], 1)
    w1 = np.sqrt(3 / var(mean))
    coef = np.linalg.lstsq(x * w1[:, None], mean * w1, rcond=None)[0]
    assert (coef[1:] > 0).all()
    fitted = np.abs(x @ coef)
    lo, hi = np.abs(mean).min(), np.abs(mean).max()
    assert fitted.min() < lo * (1 - 0.01) and fitted.max() > hi * (1 + 0.005)
    np.testing.assert_allclose(data[48].w, np.sqrt(3 / var(np.clip(fitted, lo, hi))), rtol=1e-12)


def test_the_constrained_fit_is_exact_at_any_scale_of_the_metric():
    """nnls_free_intercept on 1e-7 x a law: every candidate's RSS is below 1e-12 there, yet the least squares
    solution is returned, not the first or last feasible one. The law itself (b, c > 0) comes back whole; with
    b < 0 in the data the answer is b = 0 and the lstsq fit of a + c/(G-1) (by numpy here, c > 0)."""
    g = np.array(GRID, dtype=float)
    x = np.stack([np.ones(7), g, 1 / (g - 1)], 1)
    w = np.ones(7)
    coef, rss = nnls_free_intercept(x, 1e-7 * law(g), w)
    np.testing.assert_allclose(coef, [2e-8, 1e-9, 9e-9], rtol=1e-6)
    assert rss < 1e-28
    falling = 1e-7 * (0.3 - 0.01 * g + 0.09 / (g - 1))
    ac = np.linalg.lstsq(x[:, [0, 2]], falling, rcond=None)[0]
    assert ac[1] > 0
    coef, rss = nnls_free_intercept(x, falling, w)
    np.testing.assert_allclose(coef, [ac[0], 0.0, ac[1]], rtol=1e-6, atol=1e-20)
    assert rss == pytest.approx(float(((x[:, [0, 2]] @ ac - falling) ** 2).sum()), rel=1e-6, abs=0)


def test_no_signal_is_a_spread_of_at_most_1e_12_of_the_largest_value_but_at_least_of_1():
    """_unusable: ptp(y) <= 1e-12 x max(1, max |y|) is no signal. A spread of exactly 1e-12 with values up to 1e-12 is
    (the scale never drops below 1); 1.5e-12 around 0.5 is not; around 1e6 the threshold is 1e-6: 5e-7 is, 2e-6 is not."""
    nan = np.full(7, np.nan)
    g = np.array(GRID, dtype=float)

    def status(y):
        got = unusable(48, _aggregate(g, np.asarray(y, dtype=float), nan))
        return None if got is None else got[0]

    step = np.array([0, 0, 0, 0, 0, 0, 1.0])
    assert np.ptp(1e-12 * step) == 1e-12
    assert status(1e-12 * step) == "no_signal"
    assert status(0.5 + 1.5e-12 * step) is None
    assert status(1e6 + 5e-7 * step) == "no_signal"
    assert status(1e6 + 2e-6 * step) is None
