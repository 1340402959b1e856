"""`groupscale answer`: how its measurements become one answer (torch-free; the plan of its budget: sweeps.answer_plan).

The answer spends a budget X of sampled completions (default ``DEFAULT_FRACTION`` of the grid the spec
describes, ``grid_cost``) in three stages, run by workers.answer:

1. **probe** (THEORY.md "The probe"): K x M completions at the starting policy give tau2, sigma2, kappa,
   G*_0 = 1 + sqrt(kappa / tau2) with a bootstrap interval over prompts, and the pass rate p;
2. **pilot** (measure ``outcome`` only): one short trial at G = 8 (TRL's default) at the smallest budget,
   whose policy is probed again at its last step: G*_T, how far G* drifts as training starts;
3. **halving**: every grid G at the smallest budget, ``HALVING_SEEDS`` seeds, T0 steps (``gradient_mse``:
   R0 gradient draws) and a held-out eval; Optuna's SuccessiveHalvingPruner keeps the better half on
   their seed-mean gap, and they train on to 2 T0, 4 T0, ... (workers.answer).

``combine`` turns them into the answer (THEORY.md "The answer for a fraction of a grid"):

- G* is the probe's G*_0; the 95% interval is the hull of the probe's interval, the pilot's G*_T and the
  law fit's interval on the halving's first rung (every G, same T0) when that fit is ``ok``. Each piece
  covers under its own assumption (start policy; the drift seen so far; outcome at short T), so the
  hull covers when any one holds; it does not cover a G* that moves after the pilot's steps.
- tie set: the grid G that the law's shape G + (G* - 1)^2 / (G - 1) picks for some G* in the interval.
- g_matters: the first rung's F-test of the law against a constant on seed means (sweeps.fit evidence):
  the spread across G against seed noise. None (cannot tell) when no halving fitted in the budget.
- regret of G = 8 and of the pass-rate rule (arXiv 2607.00152: G >= 1 / (8 eps p (1 - p))) against the
  recommended G, in the metric's units, on the first rung's law curve, with a bootstrap interval over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sweeps.answer_plan import (
    N_BOOT,
    TRL_DEFAULT_G,
    AnswerPlan,
)
from sweeps.fit import LawFit, fit_law, law_curve, recommend_group_size
from sweeps.spec import SweepSpec


def passrate_group_size(p: float | None, epsilon: float, candidates: Sequence[int]) -> int:
    """The pass-rate rule (arXiv 2607.00152): the smallest candidate G >= 1 / (8 eps p (1 - p)), p the pass
    rate in (0, 1) (the largest candidate when p is 0, 1 or unknown: every group would be silent)."""
    cands = sorted(candidates)
    if p is None or not 0.0 < p < 1.0:
        return cands[-1]
    need = 1.0 / (8.0 * epsilon * p * (1.0 - p))
    return next((g for g in cands if g >= need), cands[-1])


def tie_set(lo: float, hi: float, candidates: Sequence[int]) -> list[int]:
    """The candidates that ``recommend_group_size`` picks for some G* in [lo, hi] (the pick is monotone in G*)."""
    first, last = recommend_group_size(lo, candidates), recommend_group_size(hi, candidates)
    return [g for g in sorted(candidates) if first <= g <= last]


def regret(rows: Sequence[tuple[int, int, int, float]], group_size: int, versus: int, metric: str) -> dict:
    """metric(group_size) - metric(versus) on the law curve fitted to ``rows`` (G, B, seed, metric; one budget),
    with a 95% bootstrap interval over seeds (seeds resampled within each G; each resample refitted).

    Returns:
        {value, ci95, group_size, versus}; value and ci95 None (with ``reason``) when the law cannot be fitted.
    """
    out = {"group_size": group_size, "versus": versus, "value": None, "ci95": None}

    def at(sample: Sequence[tuple[int, int, int, float]]) -> float | None:
        fit = fit_law(*zip(*sample), metric=metric, n_boot=0)
        per = fit.per_budget[0] if fit.per_budget else None
        if per is None or per.a is None or per.b is None or per.c is None:
            return None
        a, b, c = per.a, per.b, per.c
        return float(law_curve(group_size, a, b, c) - law_curve(versus, a, b, c))

    value = at(rows)
    if value is None:
        return {**out, "reason": "the law could not be fitted to the halving's first rung"}
    rng = np.random.default_rng(0)
    by_g: dict[int, list] = {}
    for r in rows:
        by_g.setdefault(r[0], []).append(r)
    draws = []
    for _ in range(N_BOOT):
        sample = [grp[i] for grp in by_g.values() for i in rng.integers(0, len(grp), len(grp))]
        d = at(sample)
        if d is not None:
            draws.append(d)
    ci = [float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))] if len(draws) >= N_BOOT // 2 else None
    return {**out, "value": value, "ci95": ci}


def _no_regret(group_size: int, versus: int) -> dict:
    return {"group_size": group_size, "versus": versus, "value": None, "ci95": None,
            "reason": "no halving sweep fitted in the budget, so there is no outcome curve to read it from"}  # fmt: skip


def _closed(ci: Sequence[float | None] | None) -> tuple[float, float] | None:
    if not ci or ci[0] is None or ci[1] is None or not (math.isfinite(ci[0]) and math.isfinite(ci[1])):
        return None
    return float(ci[0]), float(ci[1])


def _interval_pieces(
    plan: AnswerPlan, probe: dict, pilot: dict | None, halving: dict | None, metric: str
) -> tuple[float | None, list[tuple[str, tuple[float, float]]], LawFit | None]:
    """(G*, the stages' intervals, the first rung's law fit): G* is the probe's, else the pilot's, else the fit's."""
    pieces: list[tuple[str, tuple[float, float]]] = []
    g_star: float | None = probe.get("g_star")
    if (ci := _closed(probe.get("g_star_ci95"))) is not None:
        pieces.append(("probe at the start", ci))
    drift = pilot.get("probe_g_star") if pilot else None
    if pilot is not None and drift is not None and math.isfinite(drift):
        pieces.append((f"probe after the pilot's {pilot['steps']} steps", (drift, drift)))
        g_star = drift if g_star is None else g_star
    first_fit = None
    if halving and halving.get("rows") and plan.halving is not None:
        first_fit = fit_law(*zip(*halving["rows"]), metric=metric)
        unit = "steps" if plan.halving.resume else "draws"
        if first_fit.status == "ok" and (ci := _closed(first_fit.g_star_ci95)) is not None:
            pieces.append((f"law fit at {halving['rungs'][0]['length']} {unit}", ci))
            g_star = first_fit.g_star if g_star is None else g_star
    return g_star, pieces, first_fit


def _matters(first_fit: LawFit | None, spec: SweepSpec, plan: AnswerPlan) -> tuple[bool | None, str]:
    """Whether G matters (the first rung's F-test on seed means: sweeps.fit evidence), in words that say how
    short the rung was against the spec's T (a short rung may not see what the grid's T would)."""
    g_matters = None if first_fit is None else first_fit.evidence != "none"
    metric, at = spec.measure.metric, ""
    if plan.halving is not None:
        unit, full = ("steps", spec.steps) if plan.halving.resume else ("draws", spec.measure.repeats)
        at = f" after {plan.halving.lengths[0]} of the spec's {full} {unit}"
    text = {
        True: f"G matters here: {metric} varies across G more than across seeds{at}",
        False: f"G barely matters here: the spread of {metric} across G is within the seed noise{at}",
        None: "whether G matters could not be measured at this budget (no training sweep fitted in it)",
    }[g_matters]
    if first_fit is not None and first_fit.evidence_reason:
        text += f" ({first_fit.evidence_reason})"
    return g_matters, text


def _answer_evidence(g_matters: bool | None, narrow: bool) -> tuple[str, str]:
    """(strong | weak | none, why): none when G does not matter beyond seed noise; strong when it does and the
    interval spans at most half the grid in log G (sweeps.fit's WIDE_CI rule); weak otherwise."""
    if g_matters is False:
        return "none", "the halving's F-test does not show G mattering beyond seed noise"
    if g_matters and narrow:
        return "strong", "G matters beyond seed noise and the interval spans at most half the grid (in log G)"
    return "weak", "whether G matters was not measured" if narrow else "the interval spans more than half the grid (in log G)"


def combine(
    spec: SweepSpec,
    plan: AnswerPlan,
    probe: dict,
    pilot: dict | None,
    halving: dict | None,
    spent: int,
    seconds: float,
) -> dict:
    """The answer from what the stages measured (see the module docstring).

    Args:
        probe: workers.probe.run_probe's result at the starting policy.
        pilot: {group_size, steps, status, probe_g_star, reward_mean} of the pilot trial, or None.
        halving: {rows: [(G, B, seed, metric)] of the first rung, rungs: [...], best: G}, or None.
        spent: completions sampled; seconds: wall time of the stages.
    Returns:
        JSON-ready dict: status, g_star, g_star_ci95, recommended_group_size, tie_set, evidence,
        evidence_reason, g_matters, regret_g8, regret_passrate, passrate, cost, stages, message.
    """
    metric, candidates = spec.measure.metric, sorted(spec.group_sizes)
    g_star, pieces, first_fit = _interval_pieces(plan, probe, pilot, halving, metric)
    g_matters, matters = _matters(first_fit, spec, plan)
    p = probe.get("reward_mean")
    p = None if p is None else p / float(getattr(spec.task, "max_reward", 1.0))
    g_pr = passrate_group_size(p, spec.answer.epsilon, candidates)
    common = {
        "g_star": g_star,
        "g_matters": g_matters,
        "passrate": {"p": p, "epsilon": spec.answer.epsilon, "group_size": g_pr},
        "interval_pieces": [{"source": name, "ci95": list(ci)} for name, ci in pieces],
        "cost": {
            "completions": spent,
            "budget": plan.budget,
            "grid_completions": plan.grid,
            "fraction_of_grid": spent / plan.grid if plan.grid else None,
            "seconds": seconds,
        },
        "stages": {
            "plan": plan.to_dict(),
            "probe": probe,
            "pilot": pilot,
            "halving": halving,
            "first_rung_fit": first_fit.model_dump(mode="json") if first_fit else None,
        },
    }
    if g_star is None or not pieces:
        why = "neither the probe nor the halving found an interior G* (tau2 <= 0, or no closed interval)"
        return {
            "status": "no_estimate",
            **dict.fromkeys(("g_star_ci95", "recommended_group_size", "regret_g8", "regret_passrate")),
            "tie_set": [],
            "evidence": "none",
            "evidence_reason": why,
            **common,
            "message": f"no G* at this budget: {why}; {matters}",
        }
    lo = min([g_star, *(ci[0] for _, ci in pieces)])
    hi = max([g_star, *(ci[1] for _, ci in pieces)])
    span = math.log(candidates[-1] / candidates[0])
    evidence, why = _answer_evidence(g_matters, span > 0 and math.log(hi / lo) <= span / 2)  # lo >= 1: G* >= 1
    rec = recommend_group_size(g_star, candidates)
    rows = halving["rows"] if halving else None
    out = {
        "status": "ok",
        "g_star_ci95": [lo, hi],
        "recommended_group_size": rec,
        "tie_set": tie_set(lo, hi, candidates),
        "evidence": evidence,
        "evidence_reason": why,
        "regret_g8": regret(rows, TRL_DEFAULT_G, rec, metric) if rows else _no_regret(TRL_DEFAULT_G, rec),
        "regret_passrate": regret(rows, g_pr, rec, metric) if rows else _no_regret(g_pr, rec),
        **common,
    }
    return {**out, "message": answer_line(out) + f"; {matters}"}


def as_good(g: int, ties: Sequence[int]) -> str:
    """What else does as well as the recommended ``g``: ``ties``, the grid's G the data cannot tell from it
    (a tie set), in words: "anything from 2 to 4 is as good" for consecutive G, "G = 4 and 8 are as good" on a
    sparse grid (a range would promise 5, 6 and 7), "G = 4 is clearly best" for none."""
    ties = sorted(ties)
    if len(ties) < 2:
        return f"G = {g} is clearly best"
    if ties == list(range(ties[0], ties[-1] + 1)):
        return f"anything from {ties[0]} to {ties[-1]} is as good"
    return f"G = {', '.join(map(str, ties[:-1]))} and {ties[-1]} are as good"


def answer_line(answer: dict) -> str:
    """The answer in one line of words: G, how sure, what else is as good."""
    if answer.get("recommended_group_size") is None:
        return answer.get("message") or "no answer"
    g, ties, ev = answer["recommended_group_size"], answer["tie_set"], answer["evidence"]
    lo, hi = answer["g_star_ci95"]
    where = f"G* = {answer['g_star']:.3g}, 95% interval [{lo:.3g}, {hi:.3g}]"
    same = as_good(g, ties)
    if ev == "none":
        return f"use G = {g}, though any G in the grid does about as well here ({where})"
    return f"use G = {g} ({ev} evidence: {same}; {where})"
