import json
import math

import numpy as np
import pytest

from sweeps.fit import fit_law, g_star_of, recommend_group_size
from sweeps.fit.budget import edge_advice
from sweeps.fit.curve import law_curve, nnls_free_intercept, slope_rss
from sweeps.fit.evidence import law_vs_flat
from sweeps.fit.points import aggregate_all

GRID = [2, 3, 4, 6, 8, 12, 16]


def rows(f, grid=GRID, budget=48, seeds=(0, 1), noise=0.0, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    data = [(g, budget, s, f(g) + noise * rng.normal()) for g in grid for s in seeds]
    return [list(c) for c in zip(*data)]


def no_nan(fit):
    json.dumps(fit.model_dump(mode="json"), allow_nan=False)  # raises on NaN/inf


def test_known_law_recovers_g_star_4():
    fit = fit_law(*rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1)))
    assert fit.status == "ok"
    assert abs(fit.g_star - 4.0) < 0.1
    assert fit.recommended_group_size == 4
    assert fit.per_budget[0].b == pytest.approx(0.01, rel=1e-6)
    assert fit.per_budget[0].c == pytest.approx(0.09, rel=1e-6)
    no_nan(fit)


def test_noisy_seeds_give_an_interval_around_the_truth():
    fit = fit_law(*rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), seeds=range(6), noise=0.005))
    lo, hi = fit.g_star_ci95
    assert fit.status == "ok" and lo < 4.0 < hi and hi - lo < 2.0


@pytest.mark.parametrize("f, side", [(lambda g: 0.2 + 0.09 / (g - 1), "above"), (lambda g: 0.2 + 0.01 * g, "below")])
def test_best_point_on_an_edge_is_boundary_without_extrapolation(f, side):
    fit = fit_law(*rows(f))
    assert fit.status == "boundary" and fit.g_star is None
    assert fit.g_star_bound["side"] == side
    assert fit.recommended_group_size == (16 if side == "above" else 2)
    no_nan(fit)


def test_two_distinct_group_sizes_are_insufficient():
    fit = fit_law(*rows(lambda g: 0.2 + 0.01 * g, grid=[2, 4]))
    assert fit.status == "insufficient_data" and fit.g_star is None
    assert "at least 4" in fit.message


def test_all_equal_values_are_no_signal():
    fit = fit_law(*rows(lambda g: 0.3))
    assert fit.status == "no_signal"


def test_nan_rows_are_dropped_and_counted():
    g, b, s, y = rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1))
    y[0] = y[5] = math.nan
    fit = fit_law(g, b, s, y)
    assert fit.n_dropped == 2 and fit.status == "ok" and abs(fit.g_star - 4) < 0.1
    no_nan(fit)


def test_noisy_non_monotone_points_give_a_typed_status():
    rng = np.random.default_rng(3)
    fit = fit_law(GRID * 2, [48] * 14, [0] * 7 + [1] * 7, rng.uniform(0, 1, 14))
    assert fit.status in {"ok", "boundary"}
    no_nan(fit)


def test_maximize_fits_the_negated_metric():
    fit = fit_law(*rows(lambda g: 1 - (0.2 + 0.01 * g + 0.09 / (g - 1))), maximize=True)
    assert fit.status == "ok" and abs(fit.g_star - 4) < 0.1


def test_shared_g_star_across_budgets():
    f1 = rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), budget=48, seeds=range(3), noise=0.002)
    f2 = rows(
        lambda g: 0.1 + 0.02 * g + 0.18 / (g - 1),
        grid=[2, 3, 4, 6, 8, 12, 16],
        budget=96,
        seeds=range(3),
        noise=0.002,
        rng_seed=1,
    )
    fit = fit_law(*[a + b for a, b in zip(f1, f2)])
    assert fit.status == "ok" and abs(fit.g_star - 4) < 0.3
    assert fit.universality.rejected is False
    assert {b.samples_per_step for b in fit.per_budget} == {48, 96}


def test_recommendation_respects_divisors():
    assert recommend_group_size(4.0, [2, 8, 16]) in (2, 8)
    assert recommend_group_size(math.inf, [2, 8, 16]) == 16
    assert g_star_of(0.01, 0.09) == pytest.approx(4.0)


@pytest.mark.slow
def test_interval_and_universality_test_are_calibrated_on_simulated_law_data():
    """200 simulated two-budget sweeps (3 seeds, 5% relative noise) from a universal law with G* = 4.205,
    fitted as the product fits them (n_boot 200)."""
    tau2, sigma2, kappa = 0.0166, 0.1452, 0.1708
    rng = np.random.default_rng(7)
    covered = rejected = 0
    reps = 200
    g_stars, widths = [], []
    for _ in range(reps):
        data = []
        for b in (48, 96):
            for g in GRID:
                mu = (tau2 * g + sigma2 + kappa / (g - 1)) / b
                data += [(g, b, s, mu * (1 + 0.05 * rng.normal())) for s in range(3)]
        fit = fit_law(*zip(*data))
        covered += fit.g_star_ci95[0] <= 4.205 <= fit.g_star_ci95[1]
        rejected += bool(fit.universality.rejected)
        g_stars.append(fit.g_star)
        widths.append(fit.g_star_ci95[1] - fit.g_star_ci95[0])
    # the interval's width against an independent standard error: the spread of G* over the 200 sweeps
    width_ratio = float(np.median(widths)) / (2 * 1.96 * float(np.std(g_stars, ddof=1)))
    print(
        f"coverage {covered / reps:.2f} (nominal 0.95), false rejection {rejected / reps:.2f} (nominal 0.05), "
        f"median width / (2 x 1.96 x sd of G*) {width_ratio:.2f}"
    )
    # 200 repetitions: binomial sd 0.015 at 0.95 and at 0.05; the bounds allow about 3 sd
    assert covered / reps >= 0.90
    assert 0.01 <= rejected / reps <= 0.10  # an F-test that can never reject fails the lower bound
    assert 0.75 <= width_ratio <= 1.35


@pytest.mark.parametrize("trend", [1.0, -1.0, 0.0])
def test_closed_form_slope_fit_matches_the_active_set_solver(trend):
    """The shared-rho search's vectorised one-slope fit (slope >= 0) equals the exact active-set NNLS,
    for rising data (slope free), falling data (slope at its bound 0) and a constant regressor."""
    rng = np.random.default_rng(3)
    g = np.array([2.0, 3, 4, 6, 8, 12, 16])
    z = np.stack([g + r / (g - 1) for r in (0.1, 4.0, 30.0)] + [np.full(g.size, 5.0)])
    y = trend * 0.2 * g + rng.normal(0, 0.3, g.size)
    w = rng.uniform(0.5, 2.0, g.size)
    got = slope_rss(z, y, w)
    want = [nnls_free_intercept(np.stack([np.ones_like(row), row], 1), y, w)[1] for row in z]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def _two_budget_rows(noise=0.02, seeds=range(3), rng_seed=1):
    rng = np.random.default_rng(rng_seed)
    data = [
        (g, b, s, (0.1 + 0.01 * g + 0.09 / (g - 1)) * (48 / b) * (1 + noise * rng.standard_normal()))
        for b in (48, 96)
        for g in GRID
        for s in seeds
    ]
    return [list(c) for c in zip(*data)]


@pytest.mark.parametrize("table", ["one budget", "two budgets"])
@pytest.mark.parametrize("factor", [1e-9, 1e-3, 7.3, 1e9])  # the extremes and between: 1e-6, 1e3, 1e6 added nothing
def test_the_fit_does_not_depend_on_the_metric_s_units(table, factor):
    """THEORY.md "Evidence and units": scaling y changes no status, no test and G* by < 1e-6 relative."""
    g, b, s, y = (
        _two_budget_rows()
        if table == "two budgets"
        else rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), seeds=range(3), noise=0.004)
    )
    ref, fit = fit_law(g, b, s, y), fit_law(g, b, s, [v * factor for v in y])
    assert (fit.status, fit.evidence, fit.recommended_group_size) == (ref.status, ref.evidence, ref.recommended_group_size)
    assert ref.status == "ok" and fit.g_star == pytest.approx(ref.g_star, rel=1e-6)
    assert fit.g_star_ci95 == pytest.approx(ref.g_star_ci95, rel=1e-6)
    if table == "two budgets":
        assert fit.universality.p_value == pytest.approx(ref.universality.p_value, rel=1e-6)
    assert fit.per_budget[0].b == pytest.approx(ref.per_budget[0].b * factor, rel=1e-6)  # parameters in the metric's units
    assert fit.per_budget[0].points[0]["mean"] == pytest.approx(ref.per_budget[0].points[0]["mean"] * factor, rel=1e-9)
    m = ref.per_budget[0].points[0]["mean"]  # the noise model in the metric's units: var(m s) = s^2 var(m)
    assert fit.noise.variance(m * factor) == pytest.approx(ref.noise.variance(m) * factor**2, rel=1e-6)


def test_identical_seeds_give_no_interval_with_the_reason():
    fit = fit_law(*rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), seeds=(0, 1, 2)))
    assert fit.status == "ok" and fit.g_star_ci95 is None and "identical" in fit.message
    assert fit.evidence == "weak" and "no interval" in fit.evidence_reason


def test_one_seed_per_point_gets_its_interval_from_the_residuals():
    fit = fit_law(*rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), seeds=(0,), noise=0.002))
    lo, hi = fit.g_star_ci95
    assert lo < 4.0 < hi and "residuals" in fit.message


def test_evidence_is_none_for_flat_noise_and_strong_for_clean_law_data():
    flat = fit_law(*rows(lambda g: 0.5, seeds=range(3), noise=0.05, rng_seed=4))
    assert flat.evidence == "none" and flat.recommended_group_size is None
    assert "constant" in flat.evidence_reason and flat.message.startswith("no recommendation")
    clean = fit_law(*rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), seeds=range(4), noise=0.002))
    assert clean.evidence == "strong" and clean.recommended_group_size == 4


def test_a_boundary_fit_states_its_weak_evidence():
    fit = fit_law(*rows(lambda g: 0.2 + 0.09 / (g - 1), seeds=range(3), noise=0.001))
    assert fit.status == "boundary" and fit.evidence == "weak" and "edge" in fit.evidence_reason
    assert "weak evidence" in fit.message


def test_the_law_against_a_constant_is_the_textbook_f_test():
    """One seed per point (unit weights): F = ((RSS_flat - RSS_law) / 2) / (RSS_law / (P - 3)), by hand."""
    from scipy import stats

    g = np.array(GRID, dtype=float)
    y = 0.2 + 0.01 * g + 0.09 / (g - 1) + np.array([0.003, -0.002, 0.004, -0.001, 0.0, -0.003, 0.002])
    x = np.stack([np.ones_like(g), g, 1 / (g - 1)], 1)
    rss_law = float(((x @ np.linalg.lstsq(x, y, rcond=None)[0] - y) ** 2).sum())
    rss_flat = float(((y - y.mean()) ** 2).sum())
    f_hand = ((rss_flat - rss_law) / 2) / (rss_law / (g.size - 3))
    data, _ = aggregate_all(g, np.full(g.size, 48), y, np.full(g.size, np.nan))
    f_stat, p = law_vs_flat(data)
    assert f_stat == pytest.approx(f_hand, rel=1e-9) and p == pytest.approx(stats.f.sf(f_hand, 2, g.size - 3), rel=1e-9)


@pytest.mark.parametrize(
    "table",
    [
        rows(lambda g: 0.5),  # no_signal
        rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), grid=[2, 8]),  # insufficient_data
        rows(lambda g: 0.2 + 0.09 / (g - 1)),  # boundary
        rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), seeds=range(3), noise=0.002),  # ok
    ],
)
def test_every_fit_states_its_evidence_and_why(table):
    fit = fit_law(*table)
    assert fit.evidence in ("strong", "weak", "none") and fit.evidence_reason
    assert (fit.recommended_group_size is None) == (fit.evidence == "none")


def test_a_g_star_between_two_group_sizes_lists_both_as_indistinguishable():
    """rho = 2 (G* = 1 + sqrt 2 = 2.41): the law's shape G + rho/(G-1) is the same at G = 2 and 3."""
    fit = fit_law(*rows(lambda g: 0.2 + 0.01 * (g + 2.0 / (g - 1)), seeds=range(3), noise=0.001, rng_seed=2))
    assert fit.status == "ok" and fit.recommended_group_size in (2, 3)
    assert fit.equivalent_group_sizes == [2, 3] and "indistinguishable" in fit.message
    clear = fit_law(*rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), seeds=range(3), noise=0.0005))
    assert clear.equivalent_group_sizes == [4]


def test_a_point_that_comes_out_low_gets_no_extra_weight():
    """Weights come from the noise model at the fitted curve, not at the point's own mean: with noise
    growing with the mean (beta = 2 here), weighting at the observed mean would give a point whose
    seeds all came out 30% low a 1/0.7 larger weight and pull the curve to it (sweeps.fit.points.noise_model)."""
    law = lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1)  # noqa: E731
    rng = np.random.default_rng(3)
    g = np.repeat(np.array(GRID, dtype=float), 4)
    y = np.array([law(v) for v in g]) * (1 + 0.05 * rng.standard_normal(g.size))
    low = y.copy()
    low[g == 6] *= 0.7
    b, nan = np.full(g.size, 48), np.full(g.size, np.nan)
    data, noise = aggregate_all(g, b, y, nan)
    (ref,), (moved,) = data.values(), aggregate_all(g, b, low, nan)[0].values()
    assert noise is not None and noise.beta > 1.0  # the constructed noise is multiplicative
    i = GRID.index(6)
    # the refit still moves the curve toward the point by its leverage (about half here), so some of
    # the drop remains: 1.17; weighting at the observed mean gives exactly 1 / 0.7 = 1.43
    assert 1.0 <= moved.w[i] / ref.w[i] < 1.25


def test_universality_is_rejected_when_the_budgets_optima_differ():
    """G* = 3 at B = 48 (c/b = 4) and G* = 8 at B = 96 (c/b = 49): one shared G* must be rejected."""
    f1 = rows(lambda g: 0.2 + 0.01 * g + 0.04 / (g - 1), budget=48, seeds=range(3), noise=0.001)
    f2 = rows(lambda g: 0.2 + 0.002 * g + 0.098 / (g - 1), budget=96, seeds=range(3), noise=0.001, rng_seed=1)
    fit = fit_law(*[a + b for a, b in zip(f1, f2)])
    by_budget = {b.samples_per_step: b.g_star for b in fit.per_budget}
    assert by_budget[48] == pytest.approx(3.0, abs=0.3) and by_budget[96] == pytest.approx(8.0, abs=1.0)
    assert fit.universality.rejected is True and fit.universality.p_value < 0.01


def test_a_g_star_between_divisors_recommends_the_better_neighbour_of_the_law():
    # shape G + rho/(G-1), rho = (G* - 1)^2: G* = 4.6 (rho 12.96) gives 8.32 at G = 4, 8.59 at 6;
    # G* = 5.0 (rho 16) gives 9.33 at 4, 9.2 at 6. Neither is the nearest integer 5 (not a divisor of 48).
    divisors = [2, 3, 4, 6, 8, 12, 16]
    assert recommend_group_size(4.6, divisors) == 4
    assert recommend_group_size(5.0, divisors) == 6
    fit = fit_law(*rows(lambda g: 0.2 + 0.01 * g + 0.16 / (g - 1)))  # G* = 1 + sqrt(16) = 5
    assert fit.g_star == pytest.approx(5.0, abs=0.05) and fit.recommended_group_size == 6
    assert fit.per_budget[0].recommended_group_size == 6  # per budget too: 5 does not divide 48


def test_three_distinct_group_sizes_are_insufficient():
    fit = fit_law(*rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), grid=[2, 4, 8], seeds=range(4)))
    assert fit.status == "insufficient_data" and fit.g_star is None and "at least 4" in fit.message
    assert fit_law(*rows(lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), grid=[2, 4, 8, 16])).status == "ok"


def _two_budgets(f48, f96, grid=GRID):
    """Noise-free seeds (two each) of f48 at B = 48 and f96 at B = 96, as fit_law's columns."""
    a, b = rows(f48, grid=grid, budget=48), rows(f96, grid=grid, budget=96)
    return [x + y for x, y in zip(a, b)]


@pytest.mark.parametrize(
    ("c_over_b", "shared"),
    [(0.25, 1.5), (29.0**2, 30.0)],  # G* = 1 + sqrt(c/b): below 2 (rho < 1) and far above the grid's 16
    ids=["below-2", "above-the-grid"],
)
def test_the_shared_g_star_is_found_below_2_and_above_the_grid(c_over_b, shared):
    """The shared-rho search covers rho from 1e-6 to (10 G_max)^2: G* = 1.5 and G* = 30 are recovered, not clipped."""
    fit = fit_law(
        *_two_budgets(lambda g: 0.2 + 0.01 * g + 0.01 * c_over_b / (g - 1), lambda g: 0.1 + 0.03 * g + 0.03 * c_over_b / (g - 1))
    )
    assert fit.universality.shared_g_star == pytest.approx(shared, rel=1e-3)
    assert fit.universality.rho == pytest.approx(c_over_b, rel=2e-3)


def test_no_finite_shared_g_star_when_larger_groups_always_win():
    """b = 0 at both budgets (gap = a + c/(G-1)): the best shared rho is beyond any finite one."""
    fit = fit_law(*_two_budgets(lambda g: 0.2 + 0.09 / (g - 1), lambda g: 0.1 + 0.2 / (g - 1)))
    assert fit.universality.shared_g_star is None and fit.universality.rho is None


def test_law_curve_is_a_plus_b_g_plus_c_over_g_minus_1():

    # G = 2: 1 + 1 + 4 = 6; G = 3: 1 + 1.5 + 2 = 4.5; G = 5: 1 + 2.5 + 1 = 4.5
    assert law_curve([2, 3, 5], 1.0, 0.5, 4.0).tolist() == [6.0, 4.5, 4.5]
    assert float(law_curve(9, 0.0, 0.25, 8.0)) == 3.25  # a scalar G: 0 + 2.25 + 1


def test_the_boundary_advice_names_the_side_and_the_edge():

    assert edge_advice("below", 2) == (
        "G* is at or below 2, the smallest group size: use G = 2 (the fit finds no interior optimum, "
        "so smaller groups and more prompts win throughout the grid)"
    )
    assert edge_advice("below", 3) == (
        "G* is at or below the edge of the grid (3); extend group_sizes below 3 before trusting a recommendation"
    )
    assert edge_advice("above", 2) == (
        "G* is at or above the edge of the grid (2); extend group_sizes above 2 before trusting a recommendation"
    )
    fit = fit_law(*rows(lambda g: 0.2 + 0.09 / (g - 1)))  # larger G always better: above the grid's 16
    assert fit.message.startswith(edge_advice("above", 16) + "; weak evidence: ")
