"""Learning-rate tuning (spec ``tune_lr``): a short in-memory Optuna search of the lr at one (G, B).

Before the sweep proper, every (G, B) gets ``trials`` short GRPO trials (``steps`` each) at learning
rates drawn log-uniformly from [low, high]; the sweep's trials at that (G, B) then train with the best
one. The study lives in memory inside the worker and the result is plain data (it travels back from a
Ray worker as is); ``frozen_trials`` turns it into Optuna FrozenTrials for a study the controller keeps
in its own storage (``study.add_trials``). Pure of Ray and MLflow: per-trial metrics leave through the
``make_report(number, lr)`` reports and ``on_trial_end(trial)``.

Sampler: TPE (Bergstra et al., NeurIPS 2011) seeded, with ``n_startup`` random trials first (TPE's
default of 10 would make a study of 6-8 trials purely random).

Pruner: ``MedianPruner`` (Golovin et al., "Google Vizier", KDD 2017: the median stopping rule), not
successive halving. The study is small (a handful of sequential trials) and the intermediate value is
noisy (a few steps of sampled rewards); successive halving (ASHA) promotes only the top 1/eta at each
rung and, with two or three finished trials, stops every trial not better than the best so far. The
median rule only stops a trial that is worse than half of the finished ones at the same step, and
with ``n_startup_trials = n_min_trials = n_startup`` it never judges before ``n_startup`` trials have
finished (so the first trials always run to the end) nor in the first quarter of the steps
(``n_warmup_steps``), where the reward has not moved yet for any lr.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import FrozenTrial, TrialState

from sweeps.trial import TrialConfig, TrialOutcome
from workers.engines.base import Report

# The final metric a tuning trial is judged by, and whether lower or higher is better.
DIRECTIONS = {"gap": "minimize", "eval_accuracy": "maximize", "eval_accuracy_sampled": "maximize"}
INTERMEDIATE_METRIC = "tune_lr.intermediate"  # what the pruner saw, forwarded to the per-trial report


class _TuningTrialFailed(Exception):
    """A tuning trial that gave no value (non-finite loss, no signal, non-finite metric): state FAIL."""


def default_metric(cfg: TrialConfig) -> str:
    """The metric the law uses for cfg.measure (as SweepSpec.measure.metric): ``gap`` for outcome trials.

    Raises:
        ValueError: measure gradient_mse (measured at the starting policy: no lr to tune).
    """
    if cfg.measure.kind != "outcome":
        raise ValueError(f"tune_lr needs measure outcome (trained trials); measure {cfg.measure.kind!r} does not train")
    return "gap"


def n_startup(trials: int) -> int:
    """Trials run to the end, with lr drawn at random, before TPE models and the pruner judges:
    min(trials, max(2, trials // 3))."""
    return min(trials, max(2, trials // 3))


def tune_learning_rate(
    cfg: TrialConfig,
    low: float,
    high: float,
    trials: int,
    steps: int,
    seed: int = 0,
    make_report: Callable[[int, float], Report] | None = None,
    *,
    metric: str | None = None,
    report_every: int | None = None,
    on_trial_end: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Search the learning rate at cfg's (G, B) with ``trials`` trials of ``steps`` steps each.

    Every trial trains ``cfg`` with lr, steps replaced (no checkpoints) and the same seed (common random numbers: the
    lrs start from the same prompts). Every ``report_every`` steps it reports to Optuna the running mean of the
    trainer's per-step ``reward_mean`` so far (the area under the learning curve: a one-step mean of B samples is too
    noisy, and a fast learner scores better), as ``1 - reward`` when the metric is minimized; it stops when the
    pruner says so.

    Args:
        cfg: the trial configuration of the sweep at this (G, B) (its lr, steps and checkpoints are replaced).
        low, high: the lr range, 0 < low < high (sampled log-uniformly); trials, steps: tuning trials and optimizer
            steps of each (>= 1); seed: seed of the TPE sampler (the trials train with cfg.seed).
        make_report: ``make_report(number, lr)`` gives the report that gets trial ``number``'s metrics
            (the trainer's per-step and final metrics and ``tune_lr.intermediate``), e.g. an MLflow run.
        metric: the final metric judged (a key of DIRECTIONS); default ``default_metric(cfg)``.
        report_every: steps between intermediate values; default max(1, steps // 8).
        on_trial_end: called with each trial's plain dict (as in ``trials`` below) when it ends.

    Returns:
        Plain data: ``{"metric", "direction", "low", "high", "group_size", "samples_per_step", "seed",
        "best_lr", "best_value", "best_trial", "trials": [{"number", "lr", "value" (None unless COMPLETE),
        "state" (COMPLETE | PRUNED | FAIL), "intermediate": {step: value}, "steps_done", "reason", "seconds"}]}``.
        best_* are None when no trial completed (the caller keeps the spec's lr then).
    Raises:
        ValueError: bad range, trials or steps; an unknown metric; measure gradient_mse; or from the trainer.
    """
    metric = _checked(low, high, trials, steps, metric or default_metric(cfg))
    direction = DIRECTIONS[metric]
    study = _study(direction, trials, steps, seed)
    objective = _Objective(cfg, (low, high), steps, metric, report_every or max(1, steps // 8), make_report)
    callbacks = [] if on_trial_end is None else [lambda _study, frozen: on_trial_end(_plain(frozen))]
    study.optimize(objective, n_trials=trials, catch=(_TuningTrialFailed,), callbacks=callbacks)
    done = [_plain(t) for t in study.trials]
    best = min(
        (t for t in done if t["state"] == "COMPLETE"),
        default=None,
        key=lambda t: t["value"] if direction == "minimize" else -t["value"],
    )
    search = {"metric": metric, "direction": direction, "low": low, "high": high, "seed": seed}
    return search | {
        "group_size": cfg.group_size,
        "samples_per_step": cfg.samples_per_step,
        "best_lr": None if best is None else best["lr"],
        "best_value": None if best is None else best["value"],
        "best_trial": None if best is None else best["number"],
        "trials": done,
    }


def _checked(low: float, high: float, trials: int, steps: int, metric: str) -> str:
    """``metric``, once the search's settings are checked. Raises ValueError naming the setting and what is allowed."""
    if not (0 < low < high and math.isfinite(high)):
        raise ValueError(f"tune_lr needs 0 < low < high, got low={low}, high={high}")
    if trials < 1 or steps < 1:
        raise ValueError(f"tune_lr needs trials >= 1 and steps >= 1, got trials={trials}, steps={steps}")
    if metric not in DIRECTIONS:
        raise ValueError(f"unknown tune_lr metric {metric!r}; valid: {', '.join(DIRECTIONS)}")
    return metric


def _study(direction: str, trials: int, steps: int, seed: int) -> optuna.Study:
    """The in-memory study of one search: TPE (seeded) after n_startup(trials) random trials, the median pruner
    after a quarter of the steps."""
    startup = n_startup(trials)
    pruner = optuna.pruners.MedianPruner(
        n_startup_trials=startup, n_warmup_steps=steps // 4, interval_steps=1, n_min_trials=startup
    )
    return optuna.create_study(
        direction=direction, sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup), pruner=pruner
    )


class _Objective:
    """One tuning trial: train ``cfg`` at a sampled lr for ``steps`` steps, reporting the running mean reward to
    Optuna every ``every`` steps (pruned when its pruner says so); the value is the final ``metric``."""

    def __init__(
        self,
        cfg: TrialConfig,
        lr_range: tuple[float, float],
        steps: int,
        metric: str,
        every: int,
        make_report: Callable[[int, float], Report] | None,
    ) -> None:
        self.cfg, self.lr_range, self.steps, self.metric, self.every = cfg, lr_range, steps, metric, every
        self.make_report, self.minimize = make_report, DIRECTIONS[metric] == "minimize"

    def __call__(self, trial: optuna.Trial) -> float:
        lr = trial.suggest_float("lr", *self.lr_range, log=True)
        forward = self.make_report(trial.number, lr) if self.make_report is not None else None
        started = time.perf_counter()
        report = self._reporter(trial, lr, forward, started)
        run = dataclasses.replace(
            self.cfg.with_grpo(lr=lr),
            steps=self.steps,
            eval=self.cfg.eval.model_copy(update={"every": None}),  # its value is the final gap: no evals on the way
            checkpoint_dir=None,
            checkpoint_every=0,
        )
        from workers.engines.groupscale import train_trial  # torch: imported where a trial runs, never by the controller

        result = train_trial(run, report)
        trial.set_user_attr("seconds", time.perf_counter() - started)
        trial.set_user_attr("steps_done", result.steps_done)
        value = result.metrics.get(self.metric)
        if result.status is not TrialOutcome.SUCCEEDED or value is None or not math.isfinite(value):
            reason = result.reason or f"metric {self.metric!r} is {value}"
            trial.set_user_attr("reason", f"{result.status}: {reason}")
            raise _TuningTrialFailed(reason)
        return float(value)

    def _reporter(self, trial: optuna.Trial, lr: float, forward: Report | None, started: float) -> Report:
        """The trainer's report: forwards every metric, and every ``every`` steps gives Optuna the running mean of
        ``reward_mean`` over all steps so far (``1 - reward`` when minimizing), raising TrialPruned when pruned."""
        rewards: list[float] = []  # reward_mean of every step so far

        def report(metrics: dict[str, float], step: int) -> None:
            if forward is not None:
                forward(metrics, step)
            if "reward_mean" not in metrics:
                return
            rewards.append(float(metrics["reward_mean"]))
            trial.set_user_attr("steps_done", step)
            if step % self.every and step != self.steps:
                return
            reward = sum(rewards) / len(rewards)
            value = 1.0 - reward if self.minimize else reward
            trial.report(value, step)
            if forward is not None:
                forward({INTERMEDIATE_METRIC: value}, step)
            if trial.should_prune():
                trial.set_user_attr("seconds", time.perf_counter() - started)
                raise optuna.TrialPruned(f"lr {lr:.3g}: intermediate {value:.4f} at step {step} worse than the median")

        return report


def _plain(t: FrozenTrial) -> dict[str, Any]:
    """One FrozenTrial as plain data (int steps, floats, strings)."""
    return {
        "number": t.number,
        "lr": float(t.params["lr"]),
        "value": float(t.value) if t.state == TrialState.COMPLETE else None,
        "state": t.state.name,
        "intermediate": {int(s): float(v) for s, v in sorted(t.intermediate_values.items())},
        "steps_done": int(t.user_attrs.get("steps_done", 0)),
        "reason": t.user_attrs.get("reason"),
        "seconds": float(t.user_attrs.get("seconds", 0.0)),
    }


def frozen_trials(result: dict[str, Any]) -> list[FrozenTrial]:
    """The trials of a ``tune_learning_rate`` result as Optuna FrozenTrials (lr: log-uniform on [low, high]).

    For ``study.add_trials`` on a study with ``direction=result["direction"]`` (e.g. one kept in the
    controller's RDB storage). Accepts the result after a JSON round trip (string step keys).
    """
    dist = {"lr": FloatDistribution(result["low"], result["high"], log=True)}
    out = []
    for t in result["trials"]:
        state = TrialState[t["state"]]
        out.append(
            optuna.trial.create_trial(
                state=state,
                value=t["value"] if state == TrialState.COMPLETE else None,
                params={"lr": t["lr"]},
                distributions=dist,
                intermediate_values={int(s): float(v) for s, v in t["intermediate"].items()},
                user_attrs={k: t[k] for k in ("number", "steps_done", "reason", "seconds") if t.get(k) is not None},
            )
        )
    return out
