"""The stages every answer method runs: the probe, the pilot and the successive halving its plan holds.

Each stage runs the real worker code in this process (workers.probe, workers.measures.run_measure); the
completions it sampled are counted as it goes, so the answer reports what it spent, never more than
the plan (sweeps.answer.AnswerPlan.cost <= the budget) but under dynamic sampling (``grpo.dynamic_sampling``), whose
steps sample again until B is filled: the plan counts B a step, and what the steps sampled beyond it (their
``sampled_completions``) is added to the answer's cost as it was spent. The halving feeds its rungs' seed-mean metric
to Optuna's SuccessiveHalvingPruner (reduction factor 2), which decides the survivors.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
import optuna

from sweeps.answer import Answer, AnswerMethod, Halving, Pilot, grid_seconds, rung_cost
from sweeps.engines import get_engine
from sweeps.spec import SweepSpec
from sweeps.trial import TrialConfig, TrialOutcome
from workers.batch import prepare
from workers.engines.base import Report as StepReport
from workers.measures import run_measure
from workers.probe import run_probe
from workers.progress import Report, say
from workers.token_budget import at_budget


def run_stages(
    method: AnswerMethod, spec: SweepSpec, cache_dir: str | Path, budget: int | None = None, report: Report | None = None
) -> Answer:
    """``method``'s answer for ``spec`` within ``budget`` completions (the plan's default when None). ``report`` hears
    each stage as it runs (workers.progress: data, model, probe, pilot, halving).

    Returns:
        sweeps.answer.Answer (cost.completions <= the budget, but under dynamic sampling: the module docstring).
    Raises:
        sweeps.answer.BudgetTooSmall: the budget does not pay for the smallest probe.
        ValueError, OSError: a task, model or data file that cannot be used.
    """
    start = time.perf_counter()
    plan = method.plan(spec, budget)
    base = TrialConfig.for_trial(spec, min(spec.group_sizes), min(spec.samples_per_step), spec.seeds[0], cache_dir)
    prepare(base, report)
    k, m = plan.probe.prompts, plan.probe.completions
    say(report, "probe", f"{k} prompts x {m} completions ({k * m} samples)")
    probe = run_probe(base, spec.probe.model_copy(update={"prompts": k, "completions": m}), group_sizes=spec.group_sizes)
    spent = int(probe["samples"])
    clock = StepClock()
    pilot = None
    if plan.pilot is not None:
        pilot = _pilot(base, plan.pilot, report, clock)
        spent += plan.pilot.cost + pilot["resampled"]
        clock.completions += get_engine(spec.engine).sampled(spec, plan.pilot.steps, plan.pilot.samples_per_step)
    halving = None
    if plan.halving is not None:
        halving = _halving(spec, base, plan.halving, report, clock)
        spent += halving.pop("spent")
    answer = method.combine(spec, plan, probe, pilot, halving, spent, time.perf_counter() - start)
    answer.cost.probe_seconds = float(probe["seconds"])
    if clock.completions and clock.train_s > 0 and spec.measure.kind == "outcome":
        answer.cost.grid_seconds = grid_seconds(spec, clock.train_s / clock.completions, clock.generate_s / clock.completions)
        answer.cost.fraction_of_grid_seconds = answer.cost.seconds / answer.cost.grid_seconds
    return answer


@dataclasses.dataclass
class StepClock:
    """Seconds of the answer's training steps, from each step's ``time_generate_s``, ``time_score_s`` and
    ``time_update_s`` (groupscale's engine; evals and probes left out), and the completions those steps sampled
    (``completions``, counted by the caller as its engine prices them): the rates ``grid_seconds`` prices the grid at."""

    train_s: float = 0.0
    generate_s: float = 0.0
    completions: int = 0

    def __call__(self, metrics: dict, step: int) -> None:
        if "time_update_s" in metrics:
            generate = float(metrics.get("time_generate_s", 0.0))
            self.generate_s += generate
            self.train_s += generate + float(metrics.get("time_score_s", 0.0)) + float(metrics["time_update_s"])


def _pilot(base: TrialConfig, pilot: Pilot, progress: Report | None = None, clock: StepClock | None = None) -> dict:
    """One short trial at the pilot's G, its policy probed at pilot.probe_steps (probe.every = steps / probes); its
    steps timed by ``clock``."""
    seen: dict[str, float] = {}
    probes: dict[int, float | None] = {}
    label = f"a trial at G = {pilot.group_size}, B = {pilot.samples_per_step} for {pilot.steps} steps, probed as it trains"
    say(progress, "pilot", label, 0, pilot.steps, "steps")
    resampled = Resampled(pilot.samples_per_step)

    def report(metrics: dict, step: int) -> None:
        say(progress, "pilot", label, step, pilot.steps, "steps")
        resampled(metrics, step)
        if clock is not None:
            clock(metrics, step)
        seen.update({k: float(v) for k, v in metrics.items() if isinstance(v, int | float)})
        if "probe_tau2" in metrics:  # a probe ran at this step; no probe_g_star when tau2 <= 0 (G* beyond reach)
            probes[step] = float(metrics["probe_g_star"]) if "probe_g_star" in metrics else None

    result = run_measure(_pilot_config(base, pilot), report)
    return {
        "group_size": pilot.group_size,
        "samples_per_step": pilot.samples_per_step,
        "steps": pilot.steps,
        "status": result.status,
        "reason": result.reason,
        "probes": probes,
        "probe_prompts": pilot.probe.prompts,
        "probe_g_star": probes.get(pilot.steps),
        "reward_mean": result.metrics.get("reward_mean", seen.get("reward_mean")),
        "gap": result.metrics.get("gap"),
        "resampled": resampled.completions,
    }


@dataclasses.dataclass
class Resampled:
    """A trial's report that counts the completions its steps sampled beyond ``samples_per_step`` (B): dynamic
    sampling's ``sampled_completions`` a step (every rank's) minus B; 0 for a trial without it."""

    samples_per_step: int
    completions: int = 0

    def __call__(self, metrics: dict, step: int) -> None:
        if "sampled_completions" in metrics:
            self.completions += max(0, int(metrics["sampled_completions"]) - self.samples_per_step)


def _pilot_config(base: TrialConfig, pilot: Pilot) -> TrialConfig:
    """The pilot's trial: ``base`` at the pilot's G, B (and its share of a token budget), steps, evals and probes."""
    return dataclasses.replace(
        base,
        group_size=pilot.group_size,
        samples_per_step=pilot.samples_per_step,
        tokens_per_step=at_budget(base, pilot.samples_per_step),
        steps=pilot.steps,
        eval=base.eval.model_copy(update={"prompts": pilot.eval_prompts, "every": None}),
        probe=base.probe.model_copy(
            update={"every": pilot.probe_steps[0], "prompts": pilot.probe.prompts, "completions": pilot.probe.completions}
        ),
        checkpoint_dir=None,
    )


def _halving(
    spec: SweepSpec, base: TrialConfig, plan: Halving, report: Report | None = None, clock: StepClock | None = None
) -> dict:
    """Successive halving over plan.group_sizes: each rung trains (or, for gradient_mse, measures) every
    survivor's seeds to the rung's length, reports the seed mean to Optuna, and lets its pruner halve them.

    Returns:
        {rows: (G, B, seed, metric) of the first rung, initial: the metric's mean at step 0 over them (None without),
        rungs: [{length, group_sizes, means}], best, spent, resampled (of spent, the completions sampled beyond B a
        step)}.
    """
    metric, resume, b = spec.measure.metric, plan.resume, plan.samples_per_step
    study, trials = _halving_study(plan)
    alive, rungs, rows, spent, before = list(plan.group_sizes), [], [], 0, 0
    resampled = Resampled(b)  # every rung's trials' completions beyond B a step (dynamic sampling)
    initial: list = []  # the first rung's trials' metric at step 0 (none for gradient_mse)
    seeds = spec.seeds[: plan.seeds] + [max(spec.seeds) + 1 + i for i in range(plan.seeds - len(spec.seeds[: plan.seeds]))]
    runs, ran = sum(plan.survivors) * len(seeds), 0  # at most: the plan's survivors bound each rung
    unit = "steps" if resume else "gradient draws"
    label = f"{len(plan.group_sizes)} G x {len(seeds)} seeds at B = {b}, rungs of {', '.join(map(str, plan.lengths))} "
    label += f"{unit}, about half the G kept after each rung"
    with tempfile.TemporaryDirectory(prefix="groupscale-answer-") as work:
        for r, length in enumerate(plan.lengths):
            means = {}
            for g in alive:
                values = []
                for seed in seeds:
                    rung = f"rung {r + 1} of {len(plan.lengths)}, {length} {unit}, G = {g}, seed {seed}"
                    say(report, "halving", label, ran, runs, "runs (at most)", rung)
                    ran += 1
                    result = run_measure(_rung_config(base, plan, g, seed, length, work), _both(resampled, clock))
                    spent += rung_cost(spec, before, length, b, resume, plan.eval_prompts)
                    if clock is not None and resume:
                        clock.completions += get_engine(spec.engine).sampled(spec, length - before, b)
                    value = result.metrics.get(metric)
                    if result.status is TrialOutcome.SUCCEEDED and value is not None and np.isfinite(value):
                        values.append(float(value))
                        if r == 0:
                            rows.append((g, b, seed, float(value)))
                            initial.append(result.metrics.get(f"{metric}_initial"))
                means[g] = float(np.mean(values)) if values else None
                if means[g] is not None:
                    trials[g].report(means[g], length)
            rungs.append({"length": length, "group_sizes": list(alive), "means": means})
            alive, before = _survivors(plan, r, study, {g: trials[g] for g in alive}, means), length
    for g in alive:
        study.tell(trials[g], rungs[-1]["means"][g])
    last = {g: v for g, v in rungs[-1]["means"].items() if v is not None}
    start = [float(v) for v in initial if v is not None and np.isfinite(v)]
    return {
        "rows": rows,
        "initial": float(np.mean(start)) if start else None,
        "rungs": rungs,
        "best": min(last, key=last.get) if last else None,
        "spent": spent + resampled.completions,
        "resampled": resampled.completions,
    }


def _survivors(plan: Halving, r: int, study: optuna.Study, trials: dict[int, optuna.Trial], means: dict) -> list[int]:
    """The G of rung ``r`` (``trials``, their seed-mean ``means``) that go on: those Optuna's pruner keeps, at most the
    plan's count (ties can promote more than n // 2, and the plan's count bounds the cost); the others told pruned."""
    survivors = []
    for g, trial in trials.items():
        if means[g] is None or (r + 1 < len(plan.lengths) and trial.should_prune()):
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            survivors.append(g)
    if r + 1 < len(plan.lengths):
        survivors = sorted(survivors, key=lambda g: means[g])[: plan.survivors[r + 1]]
    return survivors


def _halving_study(plan: Halving) -> tuple[optuna.Study, dict[int, optuna.Trial]]:
    """Optuna's study of the halving (its SuccessiveHalvingPruner, reduction factor 2) and a trial per G."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # its "A new study created" line is not the user's news
    pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=plan.lengths[0], reduction_factor=2)
    study = optuna.create_study(direction="minimize", pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=0))
    trials = {}
    for g in plan.group_sizes:
        study.enqueue_trial({"group_size": g})
        trial = study.ask()
        trials[int(trial.suggest_categorical("group_size", list(plan.group_sizes)))] = trial
    return study, trials


def _rung_config(base: TrialConfig, plan: Halving, g: int, seed: int, length: int, work: str) -> TrialConfig:
    """The trial of G = ``g`` and ``seed`` on a rung of ``length`` steps (gradient draws, for gradient_mse); a rung
    resumes the previous one's checkpoint under ``work``."""
    resume = plan.resume
    return dataclasses.replace(
        base,
        group_size=g,
        samples_per_step=plan.samples_per_step,
        tokens_per_step=at_budget(base, plan.samples_per_step),
        seed=seed,
        steps=length if resume else base.steps,
        measure=base.measure.model_copy(update={"repeats": length}),
        eval=base.eval.model_copy(update={"prompts": plan.eval_prompts, "every": None}),
        probe=base.probe.model_copy(update={"every": None}),
        checkpoint_dir=str(Path(work) / f"G{g}-s{seed}") if resume else None,
        checkpoint_every=length if resume else 0,
    )


def _both(first: StepReport, second: StepClock | None) -> StepReport:
    """A report that hands each step's metrics to ``first`` and to ``second`` (when given)."""

    def report(metrics: dict, step: int) -> None:
        first(metrics, step)
        if second is not None:
            second(metrics, step)

    return report
