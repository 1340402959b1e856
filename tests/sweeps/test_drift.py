"""sweeps.answer.drift: log(G* - 1) against t / T by least squares, read at T with a Student-t prediction interval."""

import math

import pytest
from scipy import stats

from sweeps.answer.drift import extrapolate


def test_points_on_a_line_in_log_g_minus_1_are_read_at_t_exactly():
    # G*(t) - 1 = 9 exp(-t / 100): log(G* - 1) = log 9 - t / T with T = 100, so G*(100) = 1 + 9 / e = 4.311
    pts = [(t, 1 + 9 * math.exp(-t / 100)) for t in (0, 10, 20, 30)]
    d = extrapolate(pts, 100)
    assert d.g_star == pytest.approx(1 + 9 / math.e, rel=1e-9)
    assert d.slope == pytest.approx(-1.0, rel=1e-9) and d.points == 4
    assert d.ci95[0] == pytest.approx(d.g_star) and d.ci95[1] == pytest.approx(d.g_star)  # no residual, no floor


def test_the_prediction_interval_by_hand():
    # x = t / T = 0, 0.2, 0.4; y = log(G* - 1) = 0, 0.1, 0.3: slope 0.75, intercept -1/60, residuals 1/60, -1/30, 1/60
    pts = [(0, 2.0), (20, 1 + math.exp(0.1)), (40, 1 + math.exp(0.3))]
    d = extrapolate(pts, 100)
    pred = -1 / 60 + 0.75
    s2 = (1 / 3600 + 1 / 900 + 1 / 3600) / 1  # n - 2 = 1
    se = math.sqrt(s2 * (1 + 1 / 3 + (1 - 0.2) ** 2 / 0.08))
    q = stats.t.ppf(0.975, 1)
    assert d.g_star == pytest.approx(1 + math.exp(pred))
    assert d.ci95[0] == pytest.approx(1 + math.exp(pred - q * se))
    assert d.ci95[1] == pytest.approx(1 + math.exp(pred + q * se))
    assert d.slope_ci95[0] == pytest.approx(0.75 - q * math.sqrt(s2 / 0.08))


def test_the_noise_floor_widens_an_interval_that_looks_too_good():
    pts = [(t, 1 + 9 * math.exp(-t / 100)) for t in (0, 10, 20, 30)]
    d = extrapolate(pts, 100, noise_floor=0.2)
    assert d.ci95[0] < d.g_star / 1.5 and d.ci95[1] > 1.5 * d.g_star


def test_too_few_points_give_no_drift_and_a_flat_series_does_not_move():
    assert extrapolate([(0, 5.0), (10, 6.0)], 100) is None
    assert extrapolate([(0, 5.0), (10, math.inf), (10, 6.0)], 100) is None  # non-finite points are left out
    flat = extrapolate([(0, 5.0), (10, 5.2), (20, 4.8), (30, 5.1)], 100)
    assert not flat.moves and flat.ci95[0] < 5.0 < flat.ci95[1]
    falling = extrapolate([(t, 1 + 30 * math.exp(-3 * t / 100)) for t in (0, 25, 50, 75)], 100, noise_floor=0.01)
    assert falling.moves and falling.slope < 0


def test_an_upper_end_past_any_group_is_open_above():
    """Scattered points read far beyond them: the calibration printed G* in [1.00, 1.5e111]; past G_MAX (4096) the
    interval is open above (inf, served as null), the lower end and the estimate kept."""
    wild = extrapolate([(0, 3.0), (5, 40.0), (10, 2.5), (15, 60.0)], 100)
    assert math.isinf(wild.ci95[1]) and 1.0 <= wild.ci95[0] < wild.g_star < math.inf
    tame = extrapolate([(0, 3.0), (5, 3.2), (10, 2.9), (15, 3.1)], 100)
    assert tame.ci95[1] < 4096
