"""sweeps.fit.paired: the best G against every other, paired over (B, seed), Holm-adjusted; and fit_law's
evidence ``empirical`` when the law does not beat a constant but one G wins those comparisons."""

import math

import numpy as np
import pytest
from scipy import stats

from sweeps.fit import fit_law
from sweeps.fit.paired import compare_best


def _rows(table: dict[int, list[float]], budgets=(32,)):
    g, b, s, y = [], [], [], []
    for gs, values in table.items():
        for i, v in enumerate(values):
            g.append(gs), b.append(budgets[i % len(budgets)]), s.append(i // len(budgets)), y.append(v)
    return np.array(g), np.array(b), np.array(s), np.array(y)


def test_the_paired_t_test_and_holm_by_hand():
    table = {2: [0.622, 0.661, 0.623], 4: [0.60, 0.63, 0.61], 8: [0.62, 0.66, 0.62]}  # two close comparisons
    c = compare_best(*_rows(table))
    d8, d2 = np.array([0.02, 0.03, 0.01]), np.array([0.022, 0.031, 0.013])
    p8 = stats.t.sf(d8.mean() / (d8.std(ddof=1) / math.sqrt(3)), 2)
    p2 = stats.t.sf(d2.mean() / (d2.std(ddof=1) / math.sqrt(3)), 2)
    assert c.best == 4 and c.runner_up == 8 and c.n_pairs == 3
    assert p8 < 2 * p2 < 2 * p8  # so Holm's factor 2 on the smaller p decides the largest adjusted p
    assert c.p_value == pytest.approx(max(2 * min(p2, p8), max(p2, p8)))  # Holm: smaller p x 2, larger x 1
    assert c.margin == pytest.approx(0.02) and c.effect_size == pytest.approx(d8.mean() / d8.std(ddof=1))
    assert c.significant == (c.p_value < 0.05)


def test_a_g_that_is_not_better_than_all_others_is_not_significant():
    table = {2: [0.70, 0.72, 0.69], 4: [0.60, 0.63, 0.61], 8: [0.61, 0.62, 0.62]}  # 8 ties 4
    assert not compare_best(*_rows(table)).significant
    assert compare_best(*_rows({2: [0.7], 4: [0.6]})) is None  # one pair: no test


def test_a_kinked_table_gets_evidence_empirical_and_its_best_g():
    # G = 4 is lowest by far at every seed; the law's smooth shape cannot follow the kink (F-test fails)
    rng = np.random.default_rng(0)
    means = {2: 0.70, 3: 0.66, 4: 0.62, 6: 0.67, 8: 0.66, 12: 0.70, 16: 0.66}
    table = {g: [m + 0.004 * rng.normal() for _ in range(4)] for g, m in means.items()}
    fit = fit_law(*_rows(table))
    assert fit.evidence == "empirical" and fit.recommended_group_size == 4
    assert fit.comparison.best == 4 and fit.comparison.significant and fit.message == fit.comparison.message
    assert "the law does not fit better than a constant" in fit.evidence_reason
    noisy = {g: [m + 0.2 * rng.normal() for _ in range(4)] for g, m in means.items()}  # noise hides it: none stays
    out = fit_law(*_rows(noisy))
    assert out.evidence == "none" and out.recommended_group_size is None
