"""What a cheap answer is compared with: TRL's default G and the pass-rate rule, and the regret of either (torch-free).

The regret of a rival is read off the law curve fitted to the halving's first rung (sweeps.fit), with a
bootstrap interval over seeds: how much of the metric the rival's G loses against the recommended G. The interval
is never narrower than the law's own noise floor (``noise_floor``): with two seeds a G, seeds resampled within each G
see little of the scatter, and an interval of [-0.00104, -1.05e-05] was printed where seeds differed by 0.006-0.03.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sweeps.answer.result import Regret
from sweeps.fit import fit_law, law_curve
from sweeps.fit.curve import design

TRL_DEFAULT_G = 8  # GRPOConfig.num_generations
N_BOOT = 200


def passrate_group_size(p: float | None, epsilon: float, candidates: Sequence[int]) -> int:
    """The pass-rate rule (arXiv 2607.00152): the smallest candidate G >= 1 / (8 eps p (1 - p)), p the pass
    rate in (0, 1) (the largest candidate when p is 0, 1 or unknown: every group would be silent)."""
    cands = sorted(candidates)
    if p is None or not 0.0 < p < 1.0:
        return cands[-1]
    need = 1.0 / (8.0 * epsilon * p * (1.0 - p))
    return next((g for g in cands if g >= need), cands[-1])


def noise_floor(rows: Sequence[tuple[int, int, int, float]], group_sizes: Sequence[int], versus: int) -> list[float]:
    """The half-width of a 95% interval of law_curve(G) - law_curve(versus) for each G of ``group_sizes``, from the
    scatter of ``rows`` (G, B, seed, metric) about the law as a linear model in (a, b, c): 1.96 s sqrt(d' (X'X)^-1 d),
    X the rows' design [1, G, 1 / (G - 1)], d the difference of two design rows, s^2 the residual sum of squares over
    N - 3 (ordinary least squares, e.g. Seber & Lee, Linear Regression Analysis, 2nd ed., sec. 5.1). 0 with fewer
    than 4 rows or fewer than 3 distinct G (the law is not identified)."""
    g = np.array([r[0] for r in rows], dtype=float)
    if g.size < 4 or np.unique(g).size < 3:
        return [0.0] * len(group_sizes)
    x, y = design(g), np.array([r[3] for r in rows], dtype=float)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    s2 = float(((y - x @ coef) ** 2).sum()) / (g.size - 3)
    cov = s2 * np.linalg.pinv(x.T @ x)
    d = design(np.asarray(group_sizes, dtype=float)) - design(np.array([float(versus)]))
    return [1.96 * math.sqrt(max(float(row @ cov @ row), 0.0)) for row in d]


def regrets(
    rows: Sequence[tuple[int, int, int, float]] | None, group_sizes: Sequence[int], versus: int | None, metric: str
) -> list[Regret]:
    """metric(G) - metric(versus) for each G of ``group_sizes`` on the law curve fitted to ``rows`` (G, B, seed,
    metric; one budget), with a 95% bootstrap interval over seeds (seeds resampled within each G; each resample
    fitted once and read at every G), widened to value -+ ``noise_floor`` where it is narrower.

    Returns:
        one Regret per G; value and ci95 None, with ``reason``, when there are no rows, no ``versus`` or no fitted law.
    """
    out = [Regret(group_size=g, versus=versus) for g in group_sizes]
    if versus is None:
        return [r.model_copy(update={"reason": "the answer recommends no G to compare with"}) for r in out]
    if not rows:
        why = "no halving sweep fitted in the budget, so there is no outcome curve to read it from"
        return [r.model_copy(update={"reason": why}) for r in out]

    def at(sample: Sequence[tuple[int, int, int, float]]) -> list[float] | None:
        per = fit_law(*zip(*sample), metric=metric, n_boot=0).per_budget
        if not per or per[0].a is None or per[0].b is None or per[0].c is None:
            return None
        a, b, c = per[0].a, per[0].b, per[0].c
        return [float(law_curve(g, a, b, c) - law_curve(versus, a, b, c)) for g in group_sizes]

    values = at(rows)
    if values is None:
        return [r.model_copy(update={"reason": "the law could not be fitted to the halving's first rung"}) for r in out]
    rng = np.random.default_rng(0)
    by_g: dict[int, list] = {}
    for r in rows:
        by_g.setdefault(r[0], []).append(r)
    draws = []
    for _ in range(N_BOOT):
        sample = [grp[i] for grp in by_g.values() for i in rng.integers(0, len(grp), len(grp))]
        if (d := at(sample)) is not None:
            draws.append(d)
    cis: list[list[float] | None] = [None] * len(out)
    if len(draws) >= N_BOOT // 2:
        floors = noise_floor(rows, group_sizes, versus)
        cis = [
            [min(float(np.percentile(col, 2.5)), v - h), max(float(np.percentile(col, 97.5)), v + h)]
            for col, v, h in zip(np.array(draws).T, values, floors, strict=True)
        ]
    return [r.model_copy(update={"value": v, "ci95": ci}) for r, v, ci in zip(out, values, cis, strict=True)]


def regret(rows: Sequence[tuple[int, int, int, float]] | None, group_size: int, versus: int | None, metric: str) -> Regret:
    """``regrets`` of one G."""
    return regrets(rows, [group_size], versus, metric)[0]
