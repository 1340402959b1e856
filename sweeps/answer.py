"""`groupscale answer`: the plan of its budget and how its measurements become one answer (torch-free).

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
from dataclasses import asdict, dataclass

import numpy as np

from sweeps.fit import LawFit, fit_law, law_curve, recommend_group_size
from sweeps.planner import plan_trials
from sweeps.spec import SweepSpec

DEFAULT_FRACTION = 0.01  # the default budget: this share of the grid's completions
SHARES = {"probe": 0.3, "pilot": 0.2, "halving": 0.5}  # of the budget; a stage that cannot run leaves its share to the next
HALVING_SEEDS = 2  # seeds per G on the halving's rungs: the seed noise that g_matters is judged against
MIN_TRAIN_STEPS = 2  # a pilot or rung shorter than this is not run
MIN_DRAWS = 4  # a gradient_mse rung of fewer draws is not run
MIN_PROBE_PROMPTS = 8
PILOT_PROBE_PROMPTS = 64  # K of the pilot's probe at its last step
ANSWER_EVAL_PROMPTS = 32  # held-out prompts of the answer's evals (at most the spec's; the same for every G: paired)
TRL_DEFAULT_G = 8  # GRPOConfig.num_generations
N_BOOT = 200


class BudgetTooSmall(ValueError):
    """The budget does not pay for the smallest probe."""


def eval_completions(spec: SweepSpec, prompts: int | None = None) -> int:
    """Completions one held-out eval samples: prompts x 1 where the task's expected reward is exact
    (bandit, arithmetic, exact_match data: one sampled completion each for the logged sample), else
    prompts x eval.samples_per_prompt."""
    prompts = spec.eval.prompts if prompts is None else prompts
    exact = spec.task.name in ("bandit", "arithmetic") or getattr(spec.task, "exact_expected_reward", False)
    return prompts * (1 if exact else spec.eval.samples_per_prompt)


def trial_cost(spec: SweepSpec, length: int, samples_per_step: int, evals: int, eval_prompts: int | None = None) -> int:
    """Sampled completions of a trial: ``length`` steps x B plus ``evals`` held-out evals (measure outcome),
    or ``length`` gradient draws x B (measure gradient_mse, which has no eval)."""
    if spec.measure.kind == "gradient_mse":
        return length * samples_per_step
    return length * samples_per_step + evals * eval_completions(spec, eval_prompts)


def grid_cost(spec: SweepSpec) -> int:
    """Sampled completions of the full grid the spec describes: every (G, B, seed) trial for T steps with its
    evals (the one before step 1 and one per checkpoint), or ``measure.repeats`` draws per gradient_mse trial."""
    length = spec.measure.repeats if spec.measure.kind == "gradient_mse" else spec.steps
    evals = 1 + len(spec.eval.checkpoints(spec.steps))
    return sum(trial_cost(spec, length, p.samples_per_step, evals) for p in plan_trials(spec))


@dataclass(frozen=True)
class Probe:
    prompts: int  # K
    completions: int  # M

    @property
    def cost(self) -> int:
        return self.prompts * self.completions


@dataclass(frozen=True)
class Pilot:
    group_size: int
    samples_per_step: int
    steps: int
    probe: Probe  # at the pilot's last step
    eval_prompts: int
    cost: int


@dataclass(frozen=True)
class Halving:
    """Successive halving at one budget: ``group_sizes`` x ``seeds`` seeds; rung r runs its survivors to
    ``lengths[r]`` steps (gradient_mse: draws); ``survivors[r]`` G reach rung r (Optuna keeps n // 2)."""

    samples_per_step: int
    group_sizes: tuple[int, ...]
    seeds: int
    lengths: tuple[int, ...]
    survivors: tuple[int, ...]
    resume: bool  # outcome trials continue from the previous rung's checkpoint; gradient_mse draws anew
    eval_prompts: int
    cost: int


@dataclass(frozen=True)
class AnswerPlan:
    budget: int  # completions
    grid: int  # completions of the full grid
    probe: Probe
    pilot: Pilot | None
    halving: Halving | None
    skipped: dict[str, str]  # stage -> why it does not run

    @property
    def cost(self) -> int:
        """The most this plan can spend (stages that end early spend less)."""
        return self.probe.cost + (self.pilot.cost if self.pilot else 0) + (self.halving.cost if self.halving else 0)

    def to_dict(self) -> dict:
        return asdict(self)


def _halving_cost(spec: SweepSpec, n: int, seeds: int, lengths: Sequence[int], b: int, resume: bool, eval_prompts: int) -> int:
    total, survivors, before = 0, n, 0
    for length in lengths:
        total += survivors * seeds * rung_cost(spec, before, length, b, resume, eval_prompts)
        before, survivors = length, max(1, survivors // 2)
    return total


def rung_cost(spec: SweepSpec, before: int, length: int, b: int, resume: bool, eval_prompts: int) -> int:
    """Completions of one (G, seed) on a halving rung from ``before`` to ``length``: trained on from its checkpoint
    with the eval before step 1 on the first rung and one at the rung's end (outcome), or drawn anew (gradient_mse)."""
    if not resume:
        return trial_cost(spec, length, b, 0, eval_prompts)
    return trial_cost(spec, length - before, b, 1 + (1 if before == 0 else 0), eval_prompts)


def _rungs(first: int, cap: int, n: int, most: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Rung lengths first, 2 first, 4 first, ... (at most ``cap``; at most ``most`` rungs) while a halving leaves
    at least 2 G, and how many G run each rung."""
    lengths, survivors, length, alive = [], [], first, n
    while True:
        lengths.append(min(length, cap))
        survivors.append(alive)
        if alive // 2 < 2 or length >= cap or len(lengths) >= most:
            return tuple(lengths), tuple(survivors)
        alive, length = alive // 2, length * 2


def plan_answer(spec: SweepSpec, budget: int | None = None) -> AnswerPlan:
    """Split ``budget`` completions (default spec.answer.budget, else DEFAULT_FRACTION of grid_cost) over
    the probe, the pilot and the halving (SHARES; a stage that does not fit passes its share on).

    Raises:
        BudgetTooSmall: the budget does not pay for a probe of MIN_PROBE_PROMPTS x probe.completions.
    """
    grid = grid_cost(spec)
    x = int(budget or spec.answer.budget or max(1, round(DEFAULT_FRACTION * grid)))
    m = spec.probe.completions
    if x < MIN_PROBE_PROMPTS * m:
        raise BudgetTooSmall(
            f"budget {x} completions is below the smallest probe ({MIN_PROBE_PROMPTS} prompts x {m} completions = "
            f"{MIN_PROBE_PROMPTS * m}); the grid costs {grid}: give --budget of at least {MIN_PROBE_PROMPTS * m}"
        )
    probe = Probe(min(spec.probe.prompts, max(MIN_PROBE_PROMPTS, int(SHARES["probe"] * x) // m)), m)
    left, skipped = x - probe.cost, {}
    b0 = min(spec.samples_per_step)
    outcome = spec.measure.kind == "outcome"
    eval_prompts = min(spec.eval.prompts, ANSWER_EVAL_PROMPTS)
    pilot = None
    if not outcome:
        skipped["pilot"] = "measure gradient_mse: the policy does not train, so it has no drift to show"
    else:
        pilot_g = min(spec.group_sizes, key=lambda g: (abs(math.log(g / TRL_DEFAULT_G)), g))
        share = int(SHARES["pilot"] * x)  # half of it for the probe at the pilot's end, at most PILOT_PROBE_PROMPTS prompts
        pprobe = Probe(max(MIN_PROBE_PROMPTS, min(PILOT_PROBE_PROMPTS, probe.prompts, share // 2 // m)), m)
        allowance = share - pprobe.cost - 2 * eval_completions(spec, eval_prompts)
        steps = min(spec.steps, allowance // b0) if allowance > 0 else 0
        if steps >= MIN_TRAIN_STEPS:
            pilot = Pilot(pilot_g, b0, steps, pprobe, eval_prompts, trial_cost(spec, steps, b0, 2, eval_prompts) + pprobe.cost)
            left -= pilot.cost
        else:
            skipped["pilot"] = f"{SHARES['pilot']:.0%} of the budget pays for fewer than {MIN_TRAIN_STEPS} steps at B = {b0}"
    gs = tuple(sorted(g for g in spec.group_sizes if b0 % g == 0))
    cap = spec.steps if outcome else spec.measure.repeats
    halving, shortest = None, MIN_TRAIN_STEPS if outcome else MIN_DRAWS

    def cost_of(first: int, most: int) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        lengths, survivors = _rungs(first, cap, len(gs), most)
        return _halving_cost(spec, len(gs), HALVING_SEEDS, lengths, b0, outcome, eval_prompts), lengths, survivors

    for most in range(len(gs), 0, -1):  # as many rungs as fit, then the longest first rung whose halving fits what is left
        if cost_of(shortest, most)[0] > left:
            continue
        lo, hi = shortest, cap  # the cost grows with the first rung's length: bisect (T may be 10^6 steps)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if cost_of(mid, most)[0] <= left else (lo, mid - 1)
        cost, lengths, survivors = cost_of(lo, most)
        halving = Halving(b0, gs, HALVING_SEEDS, lengths, survivors, outcome, eval_prompts, cost)
        break
    if halving is None:
        skipped["halving"] = (
            f"the {left} completions left do not pay for {len(gs)} G x {HALVING_SEEDS} seeds x {shortest} "
            f"{'steps' if outcome else 'draws'} at B = {b0}"
        )
    return AnswerPlan(x, grid, probe, pilot, halving, skipped)


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


def answer_line(answer: dict) -> str:
    """The answer in one line of words: G, how sure, what else is as good."""
    if answer.get("recommended_group_size") is None:
        return answer.get("message") or "no answer"
    g, ties, ev = answer["recommended_group_size"], answer["tie_set"], answer["evidence"]
    lo, hi = answer["g_star_ci95"]
    where = f"G* = {answer['g_star']:.3g}, 95% interval [{lo:.3g}, {hi:.3g}]"
    same = f"anything from {ties[0]} to {ties[-1]} is as good" if len(ties) > 1 else "no other grid G is as good"
    if ev == "none":
        return f"use G = {g}, though any G in the grid does about as well here ({where})"
    return f"use G = {g} ({ev} evidence: {same}; {where})"
