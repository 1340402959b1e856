"""sweeps.answer.baseline: the law's gain of a move, the modelled move from an interval of G*, and the decision."""

import numpy as np
import pytest

from sweeps.answer.baseline import keep_or_move, law_gain, modelled_move
from sweeps.answer.result import Regret

GRID = [2, 3, 4, 6, 8, 12, 16, 24]


def test_the_law_gain_by_hand():
    # (8 - 4) + (G* - 1)^2 (1/7 - 1/3): 4 - 9 x 0.190476 = 2.2857 at G* = 4; 0 at (G* - 1)^2 = 21, G* = 5.583
    assert law_gain(8, 4, 4.0) == pytest.approx(2.2857142857, rel=1e-9)
    assert law_gain(8, 4, 1 + 21**0.5) == pytest.approx(0.0, abs=1e-12)
    assert law_gain(8, 8, 5.0) == 0.0
    # at G* = b no other G beats b: b is the law's integer optimum there
    assert all(law_gain(8, r, 8.0) < 0 for r in GRID if r != 8)


def test_the_modelled_move_by_hand():
    """[2.37, 4.93]: G = 3 loses at 4.93 (5 - 15.44 x 5/14 = -0.515); G = 4 gains at least 1.059 (at 4.93), G = 6 at
    least 1.118 (2 - 15.44 / 35 at 4.93): 6, the largest gain at the worse end."""
    r, gain = modelled_move(8, 2.37, 4.93, GRID)
    assert r == 6 and gain == pytest.approx(2 - (3.93**2) * (1 / 5 - 1 / 7), rel=1e-9)
    assert modelled_move(8, 2.37, 4.93, [2, 3, 4, 8]) == (4, pytest.approx(4 - 3.93**2 * (1 / 3 - 1 / 7), rel=1e-9))
    assert modelled_move(8, 5.0, 9.0, GRID) is None  # holds 8: b is the law's pick at G* = 8
    assert modelled_move(8, 2.5, float("inf"), GRID) is None  # open above: nothing bounds the worse end
    r, _ = modelled_move(8, 20.0, 40.0, GRID)
    assert r in (16, 24)


@pytest.mark.parametrize("seed", range(3))
def test_a_modelled_move_beats_the_users_g_at_every_g_star_of_the_interval(seed):
    """Both ends decide because the gain is monotone in G*: checked on 200 G* inside each of 300 random intervals."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        lo = float(np.exp(rng.uniform(0, np.log(40))))
        hi = lo * float(np.exp(rng.uniform(0, 1.5)))
        base = int(rng.choice(GRID))
        move = modelled_move(base, lo, hi, GRID)
        inside = np.linspace(lo, hi, 200)
        if move is None:  # then every G loses to b somewhere in the interval
            assert all(min(law_gain(base, r, g) for g in inside) <= 1e-9 for r in GRID if r != base)
        else:
            assert min(law_gain(base, move[0], g) for g in inside) == pytest.approx(move[1], abs=1e-9)
            assert move[1] > 0


def _regret(base: int, versus: int, value=None, ci=None) -> Regret:
    return Regret(group_size=base, versus=versus, value=value, ci95=ci, reason=None if ci else "not measured")


def test_a_measured_loss_keeps_the_users_g_whatever_the_interval_says():
    gains = {4: _regret(8, 4, -0.02, [-0.03, -0.01])}
    kept = keep_or_move(8, 4, gains.__getitem__, "gap", (3.9, 4.3), GRID)
    assert kept.action == "keep" and "moving to G = 4 is a measured loss (gap -0.02" in kept.reason
    # the modelled G (6 on [2.37, 4.93]) measured a loss on the rows: keep
    gains = {3: _regret(8, 3, 0.01, [-0.01, 0.03]), 6: _regret(8, 6, -0.01, [-0.02, -0.001])}
    kept = keep_or_move(8, 3, gains.__getitem__, "gap", (2.37, 4.93), GRID)
    assert kept.action == "keep" and kept.gain.versus == 6 and "but the move is a measured loss" in kept.reason
    # measured and inconclusive for 3, nothing against 6: the modelled move, its gain measured against 6
    gains[6] = _regret(8, 6, 0.005, [-0.002, 0.012])
    moved = keep_or_move(8, 3, gains.__getitem__, "gap", (2.37, 4.93), GRID)
    assert moved.action == "move" and moved.use_group_size == 6 and moved.gain.versus == 6
    assert "; measured: gap +0.005 at G = 8 against G = 6" in moved.reason
    # no interval at T: keep
    kept = keep_or_move(8, 3, gains.__getitem__, "gap", None, GRID)
    assert kept.action == "keep" and kept.reason.startswith("keep G = 8: at this budget no G is measurably better")


def test_under_dynamic_sampling_the_filtered_law_moves_only_at_97_5_percent_of_resamples():
    """``filtered``: the share of the probe's resamples in which the filtered law puts the recommended G below the
    user's; at least 0.975 moves (a one-sided 2.5%, as the other two kinds), 0.97 keeps, a measured loss keeps."""
    unmeasured = {2: _regret(8, 2)}
    moved = keep_or_move(8, 2, unmeasured.__getitem__, "gap", None, GRID, filtered=0.975)
    assert moved.action == "move" and moved.use_group_size == 2
    assert moved.reason.startswith("move to G = 2: under dynamic sampling the filtered law puts G = 2 below G = 8 in 97.5%")
    kept = keep_or_move(8, 2, unmeasured.__getitem__, "gap", None, GRID, filtered=0.97)
    assert kept.action == "keep" and kept.use_group_size == 8
    loss = {2: _regret(8, 2, -0.02, [-0.03, -0.01])}
    assert keep_or_move(8, 2, loss.__getitem__, "gap", None, GRID, filtered=1.0).action == "keep"
