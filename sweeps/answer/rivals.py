"""What a cheap answer is compared with: TRL's default G and the pass-rate rule, and the regret of either (torch-free).

The regret of a rival is read off the law curve fitted to the halving's first rung (sweeps.fit), with a
bootstrap interval over seeds: how much of the metric the rival's G loses against the recommended G.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sweeps.answer.result import Regret
from sweeps.fit import fit_law, law_curve

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


def regret(rows: Sequence[tuple[int, int, int, float]] | None, group_size: int, versus: int | None, metric: str) -> Regret:
    """metric(group_size) - metric(versus) on the law curve fitted to ``rows`` (G, B, seed, metric; one budget),
    with a 95% bootstrap interval over seeds (seeds resampled within each G; each resample refitted).

    Returns:
        Regret; value and ci95 None, with ``reason``, when there are no rows, no ``versus`` or no fitted law.
    """
    out = Regret(group_size=group_size, versus=versus)
    if versus is None:
        return out.model_copy(update={"reason": "the answer recommends no G to compare with"})
    if not rows:
        return out.model_copy(
            update={"reason": "no halving sweep fitted in the budget, so there is no outcome curve to read it from"}
        )

    def at(sample: Sequence[tuple[int, int, int, float]]) -> float | None:
        fit = fit_law(*zip(*sample), metric=metric, n_boot=0)
        per = fit.per_budget[0] if fit.per_budget else None
        if per is None or per.a is None or per.b is None or per.c is None:
            return None
        return float(law_curve(group_size, per.a, per.b, per.c) - law_curve(versus, per.a, per.b, per.c))

    value = at(rows)
    if value is None:
        return out.model_copy(update={"reason": "the law could not be fitted to the halving's first rung"})
    rng = np.random.default_rng(0)
    by_g: dict[int, list] = {}
    for r in rows:
        by_g.setdefault(r[0], []).append(r)
    draws = []
    for _ in range(N_BOOT):
        sample = [grp[i] for grp in by_g.values() for i in rng.integers(0, len(grp), len(grp))]
        if (d := at(sample)) is not None:
            draws.append(d)
    ci = [float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))] if len(draws) >= N_BOOT // 2 else None
    return out.model_copy(update={"value": value, "ci95": ci})
