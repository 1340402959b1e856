"""G* over training time (sweeps.over_time): the law at each checkpoint and the test of G* against T."""

import numpy as np
import pytest

from sweeps import over_time
from sweeps.fit import LawFit, TimeUniversality, fit_law
from sweeps.over_time import _raw_g_stars, _slope, fit_over_time, step_fits

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


# --- exact messages and arithmetic of the test, with the bootstrap's slopes scripted ---


def scripted(monkeypatch, slopes, n_boot, g_stars=(3.25, 5.0, 9.5), raw=lambda g, b, y: [None] * len(y)):
    """fit_over_time's TimeUniversality when _slope returns ``slopes`` in turn (the point estimate first,
    then one per resample; None: a resample without a finite G* at 2 checkpoints) and the fits at
    T = 10, 20, 40 are known, with these G* (None: a boundary fit). Nothing is fitted."""
    it = iter(slopes)
    monkeypatch.setattr(over_time, "_slope", lambda steps, g_stars: next(it))
    monkeypatch.setattr(over_time, "_raw_g_stars", raw)
    known = {t: LawFit(status="ok" if v is not None else "boundary", g_star=v) for t, v in zip(STEPS, g_stars)}
    y = {t: [t / 1000, 0.2, 0.3, 0.4] for t in STEPS}
    _, uni = fit_over_time([2, 2, 4, 4], [8] * 4, [0, 1, 0, 1], y, n_boot=n_boot, known=known)
    return uni


def test_the_consistent_message_gives_the_slope_the_percentile_interval_and_p(monkeypatch):
    """41 draws -0.5, -0.4, ..., 3.5: the 2.5% and 97.5% percentiles are draws 1 and 39 exactly
    (index 40 * 0.025 = 1), so the interval is [-0.4, 3.4]; 6 of 41 draws are <= 0, so p = 2 * 6/41."""
    draws = [k / 10 for k in range(-5, 36)]
    uni = scripted(monkeypatch, [0.5, *draws], n_boot=41)
    assert uni.slope == 0.5 and uni.slope_ci95 == pytest.approx([-0.4, 3.4], abs=1e-12)
    assert uni.p_value == pytest.approx(12 / 41) and uni.rejected is False
    assert uni.message == (
        "one G* over training time is consistent with the data (slope of log G* on log T = 0.5, 95% CI [-0.4, 3.4], p = 0.29)"
    )


@pytest.mark.parametrize(
    "draws, p",
    [
        ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0.2),  # P(d <= 0) = 1/10 (a draw at 0 counts): p = 2 * 0.1
        ([0, -1, -2, -3, -4, -5, -6, -7, -8, -9], 0.2),  # P(d >= 0) = 1/10
        ([0] * 10, 1.0),  # 2 * min(1, 1) = 2, capped at 1
    ],
)
def test_the_p_value_is_twice_the_smaller_tail_counting_zero_in_both(monkeypatch, draws, p):
    """p = min(1, 2 * min(P(d <= 0), P(d >= 0))) over the resampled slopes d."""
    uni = scripted(monkeypatch, [0.1, *draws], n_boot=10)
    assert uni.p_value == pytest.approx(p, abs=1e-12) and uni.rejected is False


def test_p_at_exactly_alpha_is_not_a_rejection(monkeypatch):
    """One of 40 draws <= 0: p = 2/40 = 0.05 = ALPHA, and the test rejects only at p < 0.05."""
    uni = scripted(monkeypatch, [0.5, -1.0, *[1.0] * 39], n_boot=40)
    assert uni.p_value == 0.05 and uni.rejected is False
    assert uni.message.startswith("one G* over training time is consistent with the data (")


def test_a_rejection_names_the_direction_and_the_first_and_last_checkpoints(monkeypatch):
    """No resample crosses 0: p = 0, written as p < 1 / (number of usable resamples) = 1/40 (one of the
    41 had no slope); the 20 draws at 0.4 and 20 at 0.6 put the percentiles at 0.4 and 0.6."""
    uni = scripted(monkeypatch, [0.5, None, *[0.4] * 20, *[0.6] * 20], n_boot=41)
    assert uni.p_value == 0.0 and uni.rejected is True and uni.slope_ci95 == pytest.approx([0.4, 0.6])
    assert uni.message == (
        "G* changes with training time (slope of log G* on log T = 0.5, 95% CI [0.4, 0.6], p < 0.025)"
        ": G* grows from 3.25 at T=10 to 9.5 at T=40"
    )


def test_a_negative_slope_shrinks(monkeypatch):
    """The mirror image: G* falls from 9.5 at T=10 to 3.25 at T=40."""
    uni = scripted(monkeypatch, [-0.5, *[-0.4] * 20, *[-0.6] * 20], n_boot=40, g_stars=(9.5, 5.0, 3.25))
    assert uni.rejected is True and uni.message == (
        "G* changes with training time (slope of log G* on log T = -0.5, 95% CI [-0.6, -0.4], p < 0.025)"
        ": G* shrinks from 9.5 at T=10 to 3.25 at T=40"
    )


@pytest.mark.parametrize(
    "g_stars, trend",
    [
        ((None, 5.0, 9.5), "grows from 5 at T=20 to 9.5 at T=40"),
        ((3.25, 5.0, None), "grows from 3.25 at T=10 to 5 at T=20"),
        ((3.25, None, 9.5), "grows from 3.25 at T=10 to 9.5 at T=40"),
    ],
)
def test_the_test_is_over_the_checkpoints_whose_fit_gives_a_g_star(monkeypatch, g_stars, trend):
    """A boundary fit shows no G* at its checkpoint (`fit` prints "-"), so the slope leaves it out and the trend
    runs from the first to the last checkpoint with a G*."""
    seen = []
    raw = lambda g, b, y: seen.append(y[:, 0].tolist()) or [None] * len(y)  # noqa: E731
    uni = scripted(monkeypatch, [0.5, *[0.4] * 20, *[0.6] * 20], n_boot=40, g_stars=g_stars, raw=raw)
    kept = [t for t, v in zip(STEPS, g_stars) if v is not None]
    assert seen[0] == [t / 1000 for t in kept]  # the rows of those checkpoints (y = T/1000 for the first trial)
    assert uni.rejected is True and uni.message.endswith(f"p < 0.025): G* {trend}")


def test_one_checkpoint_with_a_g_star_gives_no_test_however_many_have_data(monkeypatch):
    """A new user's sweep printed "T=15: 5.26, T=30: -, T=45: -, T=60: -" and then a slope and p from the raw G*
    at the boundary checkpoints: one G* is not a trend."""
    uni = scripted(monkeypatch, [0.5, *[0.4] * 20], n_boot=20, g_stars=(3.25, None, None))
    assert uni == TimeUniversality(message="G* is finite at fewer than 2 checkpoints (T=10 only): no test of G* against T")
    uni = scripted(monkeypatch, [0.5, *[0.4] * 20], n_boot=20, g_stars=(None, None, float("inf")))
    assert uni == TimeUniversality(message="G* is finite at fewer than 2 checkpoints: no test of G* against T")


def test_no_slope_from_the_unweighted_g_stars_gives_no_test(monkeypatch):
    """The fits give a G* at 3 checkpoints but the unweighted G* behind the slope is not finite at 2 of them."""
    uni = scripted(monkeypatch, [None], n_boot=20)
    assert uni == TimeUniversality(
        message="the unweighted fit's G* is finite at fewer than 2 of the checkpoints with a G*: no test of G* against T"
    )


@pytest.mark.parametrize(
    "n_boot, usable, tested",
    [
        (4, 2, True),  # 2 of 4: half is enough (2 < 4 // 2 is false)
        (5, 2, True),  # 2 of 5: 5 // 2 = 2, so still enough
        (4, 1, False),  # 1 of 4: fewer than half
    ],
)
def test_most_resamples_without_a_slope_give_the_point_slope_and_no_interval(monkeypatch, n_boot, usable, tested):
    """Fewer than n_boot // 2 resamples with a slope: no interval or p, the point slope and the reason."""
    draws = [0.2] * usable + [None] * (n_boot - usable)
    uni = scripted(monkeypatch, [0.3, *draws], n_boot=n_boot)
    if tested:
        assert uni.slope_ci95 == pytest.approx([0.2, 0.2]) and uni.p_value == 0.0
    else:
        assert uni == TimeUniversality(slope=0.3, message="most bootstrap resamples had no finite G* at 2 checkpoints")


# --- the fits at each checkpoint, the defaults and the resampling, on real data ---


def test_two_checkpoints_give_a_test_whose_slope_joins_their_g_stars():
    """With 2 checkpoints the least-squares slope is the line through them: log(G*_40 / G*_10) / log 4."""
    g, b, s, y = table(lambda t: {10: 3.0, 20: 5.0, 40: 9.0}[t], seeds=range(2))
    fits, uni = fit_over_time(g, b, s, {10: y[10], 40: y[40]}, n_boot=20)
    expected = np.log(fits[40].g_star / fits[10].g_star) / np.log(4)
    assert uni.slope == pytest.approx(expected, rel=1e-9) and expected == pytest.approx(np.log(3) / np.log(4), rel=0.1)
    assert uni.slope_ci95 is not None and uni.p_value is not None


def test_g_star_at_fewer_than_2_checkpoints_gives_no_test():
    """No trial has a value at T=40: one finite G* is not a slope."""
    g, b, s, y = table(lambda t: 4.0, seeds=range(2))
    fits, uni = fit_over_time(g, b, s, {10: y[10], 40: [float("nan")] * len(g)}, n_boot=10)
    assert fits[40].status == "insufficient_data"
    assert uni == TimeUniversality(message="G* is finite at fewer than 2 checkpoints (T=10 only): no test of G* against T")


def test_known_fits_are_reused_and_the_others_fitted_with_the_metric_and_n_boot():
    """The caller's fit at T=40 comes back as is (its G* also ends the trend); T=10 is fit_law's with the
    same metric and n_boot (and fit_law's interval does depend on n_boot)."""
    g, b, s, y = table(lambda t: {10: 3.0, 20: 5.0, 40: 9.0}[t], seeds=range(2))
    sentinel = LawFit(status="ok", g_star=123.0, message="made by the caller")
    fits, uni = fit_over_time(g, b, s, {10: y[10], 40: y[40]}, metric="loss", n_boot=7, known={40: sentinel})
    assert fits[40] is sentinel and uni.message.endswith("to 123 at T=40")
    assert fits[10].metric == "loss" and fits[10] == fit_law(g, b, s, y[10], metric="loss", n_boot=7)
    assert fits[10].g_star_ci95 != fit_law(g, b, s, y[10], metric="loss", n_boot=8).g_star_ci95


def test_the_defaults_are_200_resamples_from_seed_0_and_the_gap(monkeypatch):
    """A call with the defaults equals one with n_boot=200, random_state=0, and differs from one with
    another seed or one more resample. Known fits everywhere and a stand-in G* (each checkpoint's mean)
    keep 200 resamples fast; the fit made with the default metric is labelled gap."""
    monkeypatch.setattr(over_time, "_raw_g_stars", lambda g, b, y: list(y.mean(axis=1)))
    g, b, s, y = table(lambda t: 4.0, seeds=range(2))
    known = {t: LawFit(status="ok", g_star=4.0) for t in STEPS}
    run = lambda **kw: fit_over_time(g, b, s, y, known=known, **kw)[1]  # noqa: E731
    default = run()
    assert default == run(n_boot=200, random_state=0)
    assert default.slope_ci95 != run(n_boot=200, random_state=1).slope_ci95
    assert default.slope_ci95 != run(n_boot=201, random_state=0).slope_ci95
    fits, _ = fit_over_time(g, b, s, {40: y[40]}, n_boot=5)
    assert fits[40].metric == "gap"


def test_resampling_draws_whole_trials_within_each_cell(monkeypatch):
    """Every resample keeps the number of trials in each (G, B) cell, draws only trials of that cell
    (with replacement), and keeps a trial's checkpoints together. Trial j is marked by y = j + T/100."""
    seen = []
    monkeypatch.setattr(over_time, "_raw_g_stars", lambda g, b, y: seen.append((g, b, y)) or list(y.mean(axis=1) + 1))
    g, b = [2, 2, 2, 4, 4, 8, 8], [8, 8, 8, 8, 8, 16, 16]
    y = {t: [j + t / 100 for j in range(7)] for t in STEPS}
    fit_over_time(g, b, [0, 1, 2, 0, 1, 0, 1], y, n_boot=20, known={t: LawFit(status="ok", g_star=4.0) for t in STEPS})
    assert len(seen) == 21  # the point estimate, then one per resample
    repeats = False
    for gr, br, yr in seen[1:]:
        trial = np.round(yr[0] - 0.1).astype(int)
        assert np.allclose(yr - trial, np.array(STEPS)[:, None] / 100)  # whole trials
        assert [(g[j], b[j]) for j in trial] == list(zip(gr, br))  # each drawn from its own cell
        assert sorted(zip(gr, br)) == sorted(zip(g, b))  # cell sizes kept
        repeats |= len(set(trial)) < len(trial)
    assert repeats  # with replacement


def test_a_cell_of_one_trial_gives_no_test_rather_than_a_zero_width_interval(monkeypatch):
    """With one seed per (G, B) every resample is the data itself: the slope's interval would have zero width and
    p = 0 whatever the noise (a first sweep of one seed was told "G* changes with training time, p < 0.005")."""
    monkeypatch.setattr(over_time, "_raw_g_stars", lambda g, b, y: list(2 + y.mean(axis=1)))
    g, b = [2, 4, 8, 8], [8, 8, 16, 16]
    y = {t: [j + t / 100 for j in range(4)] for t in STEPS}
    _, uni = fit_over_time(g, b, [0, 0, 0, 1], y, n_boot=20, known={t: LawFit(status="ok", g_star=4.0) for t in STEPS})
    assert uni is not None and uni.rejected is None and uni.p_value is None and uni.slope_ci95 is None
    assert uni.slope is not None and uni.message == (
        "2 of 3 (G, B) cells have one trial: resampling whole trials needs at least 2 seeds in each, so no test of G* "
        "against T (add seeds)"
    )


# --- the helpers ---


def test_slope_of_a_power_law_is_its_exponent():
    """G* = 2 T^0.5: log G* = log 2 + 0.5 log T, so the slope is 0.5."""
    assert _slope(STEPS, [2 * t**0.5 for t in STEPS]) == pytest.approx(0.5, abs=1e-12)


def test_slope_skips_checkpoints_without_a_finite_positive_g_star():
    """Only T=1 (G* = 2) and T=64 (G* = 16) count: slope log(8) / log(64) = 0.5."""
    steps = [1, 2, 4, 8, 16, 32, 64]
    assert _slope(steps, [2.0, None, float("nan"), float("inf"), 0.0, -1.0, 16.0]) == pytest.approx(0.5, abs=1e-12)


def test_slope_counts_a_g_star_of_1():
    """G* = 1 (c = 0) is a finite G*: points (0, 0), (L, L), (2L, L) with L = log 2 have slope
    sum dx dz / sum dx^2 = (L * 2L/3 + L * L/3) / (2 L^2) = 0.5 (without the first point it would be 0)."""
    assert _slope([1, 2, 4], [1.0, 2.0, 2.0]) == pytest.approx(0.5, abs=1e-12)


def test_slope_needs_2_points():
    """Two points are a line (log 2 / log 4 = 0.5); one or none are not."""
    assert _slope([10, 40], [3.0, 6.0]) == pytest.approx(0.5, abs=1e-12)
    assert _slope([10, 40], [3.0, None]) is None and _slope([], []) is None


G_ROW = np.array([2.0, 3, 4, 6, 8, 12, 16, 24])
B_ROW = np.full(G_ROW.size, 48)
LAW_ROW = 0.1 + 0.01 * (G_ROW + 9 / (G_ROW - 1))  # the law without noise, rho = 9: G* = 1 + 3 = 4


def test_raw_g_stars_do_not_depend_on_units():
    """The noiseless law gives G* = 4 in any units: tiny, huge, or with the largest value exactly 1."""
    y = np.array([LAW_ROW, LAW_ROW * 1e-6, LAW_ROW * 1e6, LAW_ROW / LAW_ROW.max()])
    assert _raw_g_stars(G_ROW, B_ROW, y) == pytest.approx([4.0] * 4, rel=1e-9)


def test_raw_g_stars_are_none_for_a_checkpoint_without_values_or_with_all_zeros():
    """An all-NaN or all-zero row has no G* (and does not stop the rows after it); NaN trials are dropped."""
    partial = LAW_ROW.copy()
    partial[[1, 5]] = np.nan
    y = np.array([np.full(G_ROW.size, np.nan), np.zeros(G_ROW.size), partial])
    assert _raw_g_stars(G_ROW, B_ROW, y) == [None, None, pytest.approx(4.0, rel=1e-9)]
