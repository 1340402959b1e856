"""How an answer method's measurements become one Answer: G*, its interval (one-sided kept), the G, the evidence.

The stages (planned by sweeps.answer.plan, run by workers.answers) measure:

1. **probe** (THEORY.md "The probe"): K x M completions at the starting policy give G*(0) = 1 + sqrt(kappa / tau2)
   with a bootstrap interval over prompts (open above when some resamples have tau2 <= 0), and the pass rate p;
2. **pilot** (measure ``outcome`` only): one short trial at G = 8 (TRL's default) at the smallest budget, its
   policy probed at ``probes`` evenly spaced steps: G*(t), where training takes G* (sweeps.answer.drift);
3. **halving**: every grid G at the smallest budget, ``HALVING_SEEDS`` seeds, T0 steps (``gradient_mse``: R0
   gradient draws) and a held-out eval; Optuna's SuccessiveHalvingPruner keeps the better half on their
   seed-mean metric, and they train on to 2 T0, 4 T0, ...

``combine`` reads them the same way for every method; a method chooses only where its point estimate comes
from (``follow``: the drift fit read at the spec's T, else the start probe):

- The 95% interval is the hull of every stage's interval (the start probe's, the pilot's last probe or the drift
  fit's, the first rung's law fit when it has one), open above when any of them is. Each covers under its own
  assumption, so the hull covers when any one holds. When two of them do not overlap, the stages disagree: the
  hull is wide and the evidence is at most weak.
- Under dynamic sampling (``grpo.dynamic_sampling``) the estimate is the probe's filtered law at the spec's own cost,
  B trained completions a step (its ``filtered`` block: THEORY.md "The answer under dynamic sampling"); the unfiltered
  probe, pilot and drift spans are left out (another cost's G*), the first rung's fit kept.
- One-sided: when the estimate is open above (no finite G*, or its interval has no upper end, or the first rung's
  fit puts G* beyond the grid) the answer is the grid's largest G with ``g_star_bound`` "G* is at least lo";
  below the grid likewise with the smallest G. Never dropped, never an interval of point estimates.
- g_matters (sweeps.answer.matters): True when the first rung's F-test shows G mattering; False ("barely matters")
  only when a long enough rung bounds the spread across G within a tenth of the metric's scale; else None, why.
- evidence: none when G does not matter; strong when it does, the interval is closed, spans at most half the grid
  in log G (sweeps.fit's WIDE_CI rule) and the stages agree; weak otherwise.
- regret of G = 8 and of the pass-rate rule (arXiv 2607.00152: G >= 1 / (8 eps p (1 - p))) against the
  recommended G, in the metric's units, on the first rung's law curve, with a bootstrap interval over seeds.
- keep or move (sweeps.answer.baseline): the user's G (``answer.baseline_group_size``) is kept unless the gain of
  the recommended G over it, on the same curve, has a 95% interval above 0, or, not measured, the interval of G* at
  T puts a grid G below it on the law for every G* in it, or, under dynamic sampling, the filtered law puts the
  recommended G below it in 97.5% of the probe's resamples; the message leads with that decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sweeps.answer.baseline import keep_or_move
from sweeps.answer.drift import Drift, extrapolate
from sweeps.answer.matters import whether_g_matters
from sweeps.answer.plan import AnswerPlan
from sweeps.answer.result import Answer, Baseline, Bound, Cost, PassRate, Piece, Regret
from sweeps.answer.rivals import TRL_DEFAULT_G, passrate_group_size, regret, regrets
from sweeps.fit import LawFit, fit_law, recommend_group_size, tie_set
from sweeps.fit.evidence import WIDE_CI
from sweeps.spec import SweepSpec
from sweeps.verdict import verdict

INF = math.inf


def _interval(ci: Sequence[float | None] | None, g: float | None) -> tuple[float, float] | None:
    """A probe's interval as (lo, hi) with hi = inf when open above; None when it has no lower end either."""
    if not ci or ci[0] is None or not math.isfinite(ci[0]):
        return None if g is None else (1.0, INF)  # a finite estimate with no interval at all: nothing is bounded
    return float(ci[0]), INF if ci[1] is None or not math.isfinite(ci[1]) else float(ci[1])


def pilot_points(probe: dict, pilot: dict | None) -> list[tuple[int, float]]:
    """(step, G*) of the start probe and of each of the pilot's probes that found a finite G*."""
    points = [(0, float(probe["g_star"]))] if probe.get("g_star") is not None else []
    for step, g in sorted(((pilot or {}).get("probes") or {}).items(), key=lambda kv: int(kv[0])):
        if g is not None and math.isfinite(g):
            points.append((int(step), float(g)))
    return points


def _noise_floor(probe: dict, pilot: dict | None) -> float:
    """The sd of one pilot probe's log(G* - 1): the start probe's (from its 95% interval), times sqrt(K0 / K) for
    the pilot probes' K prompts against the start probe's K0."""
    ci, g = probe.get("g_star_ci95") or [None, None], probe.get("g_star")
    if g is None or ci[0] is None or ci[1] is None or g <= 1 or ci[0] <= 1:
        return 0.0
    sd = (math.log(ci[1] - 1) - math.log(ci[0] - 1)) / (2 * 1.96)
    k0, k = probe.get("prompts"), (pilot or {}).get("probe_prompts")
    return sd * math.sqrt(k0 / k) if k0 and k and k0 > k else sd


@dataclass(frozen=True)
class _Span:
    """One stage's interval for G* [lo, hi] (hi = inf: open above) and its point estimate ``g`` (None: none finite).
    ``kind``: start (the probe), filtered (the probe's filtered law, dynamic sampling), pilot (its last probe), drift
    (G* followed to T), fit (the first rung's law fit);
    ``side``: below when a law fit puts G* below the grid."""

    kind: str
    label: str
    lo: float
    hi: float
    g: float | None
    side: str | None = None


def _filtered_span(probe: dict, candidates: list[int]) -> _Span | None:
    """Under dynamic sampling, the probe's G of the least filtered MSE at fixed trained B (``probe["filtered"]``) and
    its bootstrap interval; below the grid (G* at most its smallest G) when every resample's best is that G."""
    block = probe.get("filtered") or {}
    if block.get("g_star") is None:
        return None
    lo, hi = block["g_star_ci95"]
    label = "probe's filtered law at the start (B trained a step)"
    if hi <= candidates[0]:
        return _Span("filtered", f"{label} (G* below the grid)", 1.0, float(candidates[0]), None, "below")
    return _Span("filtered", label, float(lo), float(hi), float(block["g_star"]))


def _spans(
    plan: AnswerPlan, probe: dict, pilot: dict | None, first_fit: LawFit | None, drift: Drift | None, candidates: list[int]
) -> list[_Span]:
    spans = []
    if (filtered := _filtered_span(probe, candidates)) is not None:  # dynamic sampling: the unfiltered G* is not its optimum
        spans.append(filtered)
        pilot, drift = None, None
    elif (ci := _interval(probe.get("g_star_ci95"), probe.get("g_star"))) is not None:
        spans.append(_Span("start", "probe at the start", *ci, probe.get("g_star")))
    if drift is not None:
        label = f"G* followed over the pilot's {(pilot or {}).get('steps')} steps, read at T = {drift.at}"
        spans.append(_Span("drift", label, *drift.ci95, drift.g_star))
    elif pilot is not None and pilot.get("probe_g_star") is not None:  # one probe: the start probe's noise, scaled
        g, z = float(pilot["probe_g_star"]), 1.96 * _noise_floor(probe, pilot)
        label = f"probe after the pilot's {pilot['steps']} steps"
        spans.append(_Span("pilot", label, 1 + (g - 1) * math.exp(-z), 1 + (g - 1) * math.exp(z), g))
    if first_fit is not None and plan.halving is not None:
        at = f"law fit at {plan.halving.lengths[0]} {'steps' if plan.halving.resume else 'draws'}"
        bound = first_fit.g_star_bound
        if first_fit.status == "ok" and (ci := _interval(first_fit.g_star_ci95, first_fit.g_star)) is not None:
            spans.append(_Span("fit", at, *ci, first_fit.g_star))
        elif first_fit.status == "boundary" and bound and first_fit.evidence != "none":
            edge, side = float(bound["group_size"]), bound["side"]
            lo, hi = (edge, INF) if side == "above" else (1.0, edge)
            spans.append(_Span("fit", f"{at} (G* {side} the grid)", lo, hi, None, side))
    return spans


def _estimate(follow: bool, spans: list[_Span]) -> _Span | None:
    """The span the answer's G* comes from: under dynamic sampling the probe's filtered law; else the drift fit read
    at T when ``follow``, else the start probe, else the pilot's last probe, else the first rung's law fit."""
    order = ("filtered", "drift", "start", "pilot", "fit") if follow else ("filtered", "start", "pilot", "fit")
    return next((sp for kind in order for sp in spans if sp.kind == kind), None)


def _disagree(spans: list[_Span]) -> str | None:
    """The first two stages whose intervals do not overlap, in words; None when all overlap."""
    for i, a in enumerate(spans):
        for b in spans[i + 1 :]:
            if a.lo > b.hi * (1 + 1e-9) or b.lo > a.hi * (1 + 1e-9):
                return f"the stages disagree ({a.label}: {_span(a.lo, a.hi)}; {b.label}: {_span(b.lo, b.hi)})"
    return None


def _span(lo: float, hi: float) -> str:
    return f"[{lo:.3g}, {hi:.3g}]" if math.isfinite(hi) else f"at least {lo:.3g}"


def _narrow(lo: float, hi: float, closed: bool, candidates: list[int]) -> bool:
    """A closed interval spanning at most WIDE_CI of the grid in log G (sweeps.fit's rule)."""
    span = math.log(candidates[-1] / candidates[0])
    return closed and span > 0 and math.log(hi / lo) <= WIDE_CI * span


def _evidence(g_matters: bool | None, matters: str, closed: bool, narrow: bool, disagree: str | None) -> tuple[str, str]:
    if g_matters is False:
        return "none", "the spread of the metric across G is bounded within a tenth of its scale (sweeps.answer.matters)"
    weak = [disagree] if disagree else []
    if not closed:
        weak.append("the interval of G* is open above")
    elif not narrow:
        weak.append("the interval spans more than half the grid (in log G)")
    if g_matters is None:
        weak.append(matters)
    if weak:
        return "weak", "; ".join(weak)
    return "strong", "G matters beyond seed noise, the stages agree and the interval spans at most half the grid (in log G)"


def _recommend(source: _Span, candidates: list[int]) -> tuple[int, Bound | None]:
    """(G, the one-sided bound or None) from the span the estimate comes from (see the module docstring)."""
    if source.side == "below":
        return candidates[0], Bound(side="below", value=source.hi, group_size=candidates[0])
    if source.g is None or not math.isfinite(source.hi):  # the estimate itself is open above: G* is at least lo
        bound = Bound(side="above", value=source.lo, group_size=candidates[-1])
        # beyond the grid, or no finite estimate: its largest G; a finite estimate inside it still picks its G
        if source.g is not None and source.g < candidates[-1]:
            return recommend_group_size(source.g, candidates), bound
        return candidates[-1], bound
    return recommend_group_size(source.g, candidates), None


def _passrate(spec: SweepSpec, probe: dict, candidates: list[int]) -> PassRate:
    """The pass-rate rule's G on the start probe's pass rate p (reward mean over the task's max reward)."""
    p = None if probe.get("reward_mean") is None else probe["reward_mean"] / spec.task.max_reward
    return PassRate(p=p, epsilon=spec.answer.epsilon, group_size=passrate_group_size(p, spec.answer.epsilon, candidates))


def combine(
    spec: SweepSpec,
    plan: AnswerPlan,
    probe: dict,
    pilot: dict | None,
    halving: dict | None,
    spent: int,
    seconds: float,
    *,
    method: str = "staged",
    follow: bool = False,
) -> Answer:
    """The answer from what the stages measured (module docstring); never NaN or inf: an open end is null. probe:
    workers.probe.run_probe's result at the starting policy; pilot: {group_size, steps, status, probes: {step: G*},
    probe_g_star (the last), probe_prompts, reward_mean} or None; halving: {rows: [(G, B, seed, metric)] of the first
    rung, rungs, best: G} or None; spent: completions sampled; seconds: the stages' wall time; follow: the estimate is
    the drift fit read at the spec's T (sweeps.answer.drift), not the start probe."""
    metric, candidates = spec.measure.metric, sorted(spec.group_sizes)
    first_fit = fit_law(*zip(*halving["rows"]), metric=metric) if halving and halving.get("rows") else None
    outcome = pilot is not None and spec.measure.kind == "outcome"
    drift = extrapolate(pilot_points(probe, pilot), spec.steps, _noise_floor(probe, pilot)) if outcome else None
    spans = _spans(plan, probe, pilot, first_fit, drift, candidates)
    source = _estimate(follow, spans)
    g_matters, matters = whether_g_matters(first_fit, spec, plan, halving)
    passrate = _passrate(spec, probe, candidates)
    common: dict[str, Any] = {  # every answer's fields but the estimate's
        "method": method,
        "g_matters": g_matters,
        "g_matters_reason": matters,
        "passrate": passrate,
        "per_prompt": (probe or {}).get("per_prompt"),
        "interval_pieces": [Piece(source=sp.label, ci95=[sp.lo, sp.hi if math.isfinite(sp.hi) else None]) for sp in spans],
        "cost": _cost(plan, spent, seconds),
        "stages": _stages(plan, probe, pilot, halving, drift, first_fit),
    }
    rec, bound = _recommend(source, candidates) if source is not None else (None, None)
    rows = (halving or {}).get("rows")
    rivals, own = _against(spec, rows, passrate.group_size, rec)
    common |= rivals
    if source is None:
        why = "neither the probe, the pilot nor the halving bounded G* (tau2 <= 0 everywhere, and no law fit)"
        message = f"no G* at this budget: {why}; {matters}"
        return Answer(status="no_estimate", evidence="none", evidence_reason=why, message=message, **common)
    lo, hi, closed = _hull(spans)
    evidence, why = _evidence(g_matters, matters, closed, _narrow(lo, hi, closed, candidates), _disagree(spans))
    at_t = (lo, hi) if closed and _read_at_t(spec, follow, drift) else None
    answer = Answer(
        status="boundary" if bound else "ok",
        g_star=source.g,
        g_star_ci95=[lo, hi if closed else None],
        g_star_bound=bound,
        recommended_group_size=rec,
        tie_set=[rec] if bound is not None and rec == bound.group_size else tie_set(lo, hi, candidates),
        evidence=evidence,
        evidence_reason=why,
        baseline=_baseline(spec, rows, rec, own, at_t, probe),
        **common,
    )
    return answer.model_copy(update={"message": _message(answer, matters)})


def _message(answer: Answer, matters: str) -> str:
    """The answer's last line: the user's question first (keep their G, or move, and why) where the decision is not
    simply the estimate's G, then the verdict in words with whether G matters."""
    said = verdict(answer.model_dump(mode="json"))
    said = said if matters in said else f"{said}; {matters}"
    base = answer.baseline
    if base is not None and base.use_group_size != answer.recommended_group_size:
        return f"{base.reason}; the estimate alone would say: {said}"
    return f"{base.reason}; {said}" if base is not None and base.action == "move" else said


def _against(spec: SweepSpec, rows: list | None, passrate_g: int, rec: int | None) -> tuple[dict[str, Any], Regret]:
    """regret_g8 and regret_passrate, and the gain of the recommended G over the user's: the rivals and the user's own
    G against the recommended G, on one bootstrap of the first rung's law curve (``rows``; none without a halving)."""
    g8, passrate, own = regrets(rows, (TRL_DEFAULT_G, passrate_g, spec.answer.baseline_group_size), rec, spec.measure.metric)
    return {"regret_g8": g8, "regret_passrate": passrate}, own


def _read_at_t(spec: SweepSpec, follow: bool, drift: Drift | None) -> bool:
    """Whether the answer's interval is one of G* at the spec's T: followed there (``tracking``'s drift fit), or a
    measure that does not train; never under dynamic sampling, whose optimum is not the unfiltered law's (THEORY.md
    "Dynamic sampling")."""
    at_t = (follow and drift is not None) or spec.measure.kind == "gradient_mse"
    return at_t and spec.grpo.dynamic_sampling is None


def _filtered_beats(probe: dict, rec: int | None, base: int) -> float | None:
    """Under dynamic sampling, the share of the probe's resamples in which the filtered law puts G = ``rec`` below
    the user's G = ``base`` (None: no filtered law, or either G outside the probe's)."""
    beats = (probe.get("filtered") or {}).get("beats") or {}
    return beats.get(str(rec), {}).get(str(base))


def _sampling_cost(probe: dict, base: Baseline | None) -> Baseline | None:
    """A move under dynamic sampling says what it costs in sampling: a step fills B with informative groups, so at
    G = r it samples about q(b) / q(r) times the completions of one at the user's G = b (the probe's q)."""
    block = probe.get("filtered") or {}
    q = dict(zip(block.get("group_sizes") or [], block.get("informative_share") or [], strict=True))
    if base is None or base.action != "move" or not q.get(base.use_group_size) or base.group_size not in q:
        return base
    ratio = q[base.group_size] / q[base.use_group_size]
    r, b = base.use_group_size, base.group_size
    said = f"{base.reason} (a step at G = {r} samples about {ratio:.2g}x the completions of one at G = {b} to fill B)"
    return base.model_copy(update={"reason": said})


def _baseline(
    spec: SweepSpec, rows: list | None, rec: int | None, own: Regret, at_t: tuple[float, float] | None, probe: dict
) -> Baseline | None:
    """The keep-or-move decision on the user's G (sweeps.answer.baseline; None without a recommended G); a modelled
    move to another G than the recommended one measures its gain on the same rows; under dynamic sampling the
    probe's filtered law is evidence too, and a move says what it costs in sampling."""
    if rec is None:
        return None
    base, metric = spec.answer.baseline_group_size, spec.measure.metric
    filtered = _filtered_beats(probe, rec, base)
    decided = keep_or_move(
        base, rec, lambda r: own if r == rec else regret(rows, base, r, metric), metric, at_t, sorted(spec.group_sizes), filtered
    )
    return _sampling_cost(probe, decided)


def _cost(plan: AnswerPlan, spent: int, seconds: float) -> Cost:
    """What the stages spent (completions, seconds) against the plan's budget and the grid's cost."""
    fraction = spent / plan.grid if plan.grid else None
    return Cost(completions=spent, budget=plan.budget, grid_completions=plan.grid, fraction_of_grid=fraction, seconds=seconds)


def _hull(spans: list) -> tuple[float, float, bool]:
    """(lo, hi, whether hi is finite): the hull of the stages' intervals, the answer's interval (the intersection
    would be too narrow to be honest)."""
    lo = min(sp.lo for sp in spans)
    hi = max(sp.hi for sp in spans)
    return lo, hi, math.isfinite(hi)


def _stages(plan: AnswerPlan, probe: dict, pilot: dict | None, halving: dict | None, drift: Any, first_fit: Any) -> dict:
    """What each stage measured, as the answer keeps it (``stages``)."""
    return {
        "plan": plan.to_dict(),
        "probe": probe,
        "pilot": pilot,
        "halving": halving,
        "drift": None if drift is None else {**asdict(drift), "moves": drift.moves},
        "first_rung_fit": first_fit.model_dump(mode="json") if first_fit else None,
    }
