"""sweeps.fit.evidence against hand computations: the law-vs-constant F-test against scipy.stats.f with the
textbook formula, and the evidence levels at their thresholds (WEAK_R2, WIDE_CI, LAW_VS_FLAT_ALPHA) with the reasons
users read (THEORY.md "Evidence and units")."""

import math

import numpy as np
import pytest
from scipy import stats

from sweeps.fit import BudgetFit, evidence
from sweeps.fit.curve import design
from sweeps.fit.points import aggregate_all
from tests.sweeps.fit.helpers import GRID, UNIVERSAL, aggregate, flat_rss, points, wls


def _textbook_f(data):
    """F = ((RSS_flat - RSS_law) / 2k) / (RSS_law / (n - 3k)) over k budgets, n points; each by lstsq."""
    rss_law = rss_flat = 0.0
    for p in data.values():
        coef, r = wls(design(p.g), p.y, p.w)
        assert (coef[1:] > 0).all()  # b, c > 0: the unconstrained fit is the constrained one
        rss_law, rss_flat = rss_law + r, rss_flat + flat_rss(p.y, p.w)
    k, n = len(data), sum(p.g.size for p in data.values())
    f = ((rss_flat - rss_law) / (2 * k)) / (rss_law / (n - 3 * k))
    return f, stats.f.sf(f, 2 * k, n - 3 * k)


def _one_seed(g, eps):
    """One seed per point (unit weights), the law G* = 4 plus residuals eps."""
    g = np.asarray(g, dtype=float)
    y = 0.2 + 0.01 * g + 0.09 / (g - 1) + np.asarray(eps)
    return aggregate_all(g, np.full(g.size, 48), y, np.full(g.size, np.nan))[0]


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
    """law_vs_flat's (F, p) equal the nested-model F-test computed here with numpy and scipy.stats.f."""
    f_hand, p_hand = _textbook_f(data)
    f_stat, p = evidence.law_vs_flat(data)
    assert math.isfinite(f_hand) and f_stat == pytest.approx(f_hand, rel=1e-7)
    assert p == pytest.approx(p_hand, rel=1e-6)


def test_no_law_against_a_constant_without_a_usable_budget():
    """Only a 3-G budget (unusable): no budget leaves a residual degree of freedom, so there is no test."""
    assert evidence.law_vs_flat({96: points([2, 4, 8], [[0.3], [0.25], [0.28]])}) is None


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
    """evidence.assess with the law-vs-constant test fixed to (F, p): none at p >= 0.05, weak at R^2 < 0.5 or an
    interval missing, open or wider than half the grid in log G, strong otherwise."""
    monkeypatch.setattr(evidence, "law_vs_flat", lambda data: test)
    usable = [BudgetFit(samples_per_step=b, status="ok", r2=r2) for b, r2 in zip((48, 96), r2s)]
    assert evidence.assess({}, usable, None if ci is None else list(ci), *grid, boundary) == want


def test_no_evidence_when_the_law_cannot_be_tested_and_4_group_sizes_suffice():
    """No usable budget: no F-test, and the reason names the least number of G that gives one (4: df2 = 4 - 3)."""
    level, reason = evidence.assess({}, [], [3.0, 8.0], 2, 16, False)
    assert (level, reason) == (
        "none",
        "too few group sizes per budget to test the law against a constant (need at least 4 distinct G at a budget)",
    )
    four = points([2, 4, 8, 16], [[0.5, 0.6], [0.3, 0.35], [0.32, 0.3], [0.4, 0.45]])
    assert evidence.law_vs_flat({48: four}) is not None


@pytest.mark.parametrize("ci", [(None, 8.0), (3.0, None), (None, None)], ids=["open below", "open above", "open both"])
def test_an_interval_open_at_either_end_is_weak_evidence(monkeypatch, ci):
    """evidence.assess: a missing bound at either end (None) is an open interval, weak evidence, whatever the other end is;
    no width is computed from it."""
    monkeypatch.setattr(evidence, "law_vs_flat", lambda data: (9.0, 1e-4))
    usable = [BudgetFit(samples_per_step=48, status="ok", r2=0.9)]
    assert evidence.assess({}, usable, list(ci), 2, 16, False) == ("weak", "the interval of G* is open")
