"""The three kinds of work the scheduler runs (a trial, a probe, an lr tuning): what is ready, launch, collect.

Each kind lists the rows ready to start (in order), launches one on the backend and, once it
ended, stores its result and ends its MLflow runs. Every status write goes through
service.lifecycle, so a cancel that lands while a job finishes wins (its compare-and-set fails).
The loop (service.scheduler.loop) gives every kind the same free-resource check.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.lifecycle import ProbeStatus, SweepStatus, TrialStatus, TuningStatus, transition
from service.scheduler.context import Context, Outcome, Work
from service.store import LrTuning, Probe, Sweep, Trial
from sweeps.finite import finite_or_none
from sweeps.planner import TrialPlan, plan_trials
from sweeps.spec import SweepSpec
from workers.config import TrialConfig
from workers.entry import run_probe_task, run_tune_lr, worker_starts

log = logging.getLogger("groupscale.scheduler")


def trial_actor_name(trial_id: str) -> str:
    return f"trial-{trial_id}"


def tuned_lrs(sweep: Sweep) -> dict[tuple[int, int], float] | None:
    """The tuned lr per (G, B) of a sweep, or None while its tuning phase runs ({} without tune_lr).
    A (G, B) whose search found nothing keeps the spec's lr."""
    if any(t.status in (TuningStatus.PENDING, TuningStatus.RUNNING) for t in sweep.lr_tunings):
        return None
    return {(t.group_size, t.samples_per_step): t.best_lr for t in sweep.lr_tunings if t.best_lr is not None}


class TrialJob:
    """A trial: run on a warm worker (workers.entry.TrialWorker, a detached named actor), logging into its
    own MLflow child run."""

    kind = "trial"

    def ready(self, ctx: Context, s: Session) -> Iterator[tuple[Trial, SweepSpec, float | None]]:
        """Pending trials of running sweeps whose lr tuning has ended, in sweep then plan order, with the tuned lr."""
        rows = s.execute(
            select(Trial, Sweep)
            .join(Sweep)
            .where(Sweep.status == SweepStatus.RUNNING, Trial.status == TrialStatus.PENDING)
            .order_by(Sweep.created_at, Trial.position)
        ).all()
        tuned: dict[str, dict[tuple[int, int], float] | None] = {}
        for trial, sweep in rows:
            if sweep.id not in tuned:
                tuned[sweep.id] = tuned_lrs(sweep)
            lrs = tuned[sweep.id]
            if lrs is not None:  # the sweep proper starts once its learning rates are tuned
                yield trial, ctx.store.spec(sweep), lrs.get((trial.group_size, trial.samples_per_step))

    def launch(self, ctx: Context, s: Session, trial: Trial, spec: SweepSpec, lr: float | None) -> Any | None:
        """Start the trial; None (nothing started) when its MLflow run cannot be created yet or it was cancelled meanwhile."""
        ckpt = ctx.checkpoint_dir(trial.id)  # a rerun resumes from it
        config = TrialConfig.from_spec(
            spec, TrialPlan(trial.group_size, trial.samples_per_step, trial.seed), ctx.settings.model_cache_dir, ckpt, lr=lr
        )
        sweep = trial.sweep
        if ctx.tracking and sweep.mlflow_parent_run_id and not trial.mlflow_run_id:  # a resume keeps its run
            trial.mlflow_run_id = ctx.take_run(trial.id)  # made ahead by prepare, if it was
            if not trial.mlflow_run_id:
                try:
                    trial.mlflow_run_id = ctx.tracking.start_trial(*self._run_args(trial, spec, config.grpo.lr))
                except Exception:  # noqa: BLE001 - this trial waits for the next tick
                    log.exception("creating the MLflow run of trial %s failed; retrying later", trial.id)
                    return None
        if not transition(s, trial, TrialStatus.RUNNING, attempts=trial.attempts + 1):
            return None  # cancelled meanwhile
        args = (config.to_dict(), ctx.tracking.uri if ctx.tracking else None, trial.mlflow_run_id)
        return ctx.backend.start_trial(
            trial_actor_name(trial.id), args, spec.resources.cpus_per_trial, spec.resources.gpus_per_trial
        )

    def prepare(self, ctx: Context, rows: list[tuple[Trial, SweepSpec, float | None]]) -> None:
        """Create the MLflow runs of the trials to launch next (``rows``, in order) on the MLflow thread,
        while the running ones train: a freed worker then starts its next trial without waiting for MLflow."""
        if ctx.tracking is None:
            return
        for trial, spec, lr in rows:
            if trial.sweep.mlflow_parent_run_id and not trial.mlflow_run_id:
                ctx.prepare_run(trial.id, ctx.tracking.start_trial, *self._run_args(trial, spec, lr))

    def adopt_runs(self, ctx: Context, s: Session, sweep: Sweep) -> None:
        """After a restart: a pending trial without a run whose run was made (ahead, or just before a crash)
        but not stored takes that run (RUNNING, tagged with its id), so that each trial keeps one run."""
        waiting = [t for t in sweep.trials if t.status == TrialStatus.PENDING and not t.mlflow_run_id]
        if not (waiting and ctx.tracking and sweep.mlflow_parent_run_id and sweep.mlflow_experiment_id):
            return
        made = ctx.safe(ctx.tracking.running_trial_runs, sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id) or {}
        for trial in waiting:
            trial.mlflow_run_id = made.get(trial.id)

    @staticmethod
    def _run_args(trial: Trial, spec: SweepSpec, lr: float | None) -> tuple:
        """Tracking.start_trial's arguments for this trial (``lr``: the tuned one, None for the spec's)."""
        sweep = trial.sweep
        return (
            sweep.mlflow_experiment_id,
            sweep.mlflow_parent_run_id,
            spec,
            trial.id,
            trial.group_size,
            trial.samples_per_step,
            trial.seed,
            spec.grpo.lr if lr is None else lr,
            sweep.task_name,  # the stored task_key: the data files are not read again
        )

    def collect(self, ctx: Context, work: Work, outcome: Outcome) -> None:
        """Store the trial's result and end its run. A worker that died more often than Ray restarts it
        (its restarts count over every trial it ran) sends the trial back to pending, to resume from its
        checkpoint on another worker, until the trial's own worker starts exceed GROUPSCALE_TRIAL_RETRIES."""
        with ctx.store.read() as s:
            fresh = ctx.store.spec(s.get(Trial, work.id).sweep).one_process_per_trial
        if outcome.died or fresh:  # gone for good (Ray's restarts used up), or vLLM's GPU memory: never reused
            ctx.backend.kill_trial(trial_actor_name(work.id))
        else:
            ctx.backend.release_trial(trial_actor_name(work.id))  # its worker stays warm for the next trial
        ckpt = ctx.checkpoint_dir(work.id)
        starts = worker_starts(ckpt)  # every start of a worker process on this trial, restarts included
        retries = ctx.settings.trial_retries
        result: dict[str, Any] = outcome.value if outcome.error is None else {"status": "failed", "metrics": {}}
        reason = result.get("reason") if outcome.error is None else outcome.error
        with ctx.store.session() as s:
            trial = s.get(Trial, work.id)
            attempts = max(trial.attempts, starts)
            if outcome.died and starts <= retries and trial.status == TrialStatus.RUNNING:
                transition(s, trial, TrialStatus.PENDING, attempts=attempts)  # resumes from its checkpoint
                return
            if outcome.died:
                reason = f"the worker died {starts} times (GROUPSCALE_TRIAL_RETRIES={retries}): {reason}"
            stored = trial.status == TrialStatus.RUNNING and transition(  # not when a cancel got there first
                s,
                trial,
                TrialStatus(result["status"]),
                reason=reason,
                seconds=result.get("seconds"),
                metrics=finite_or_none(result.get("metrics") or {}),
                attempts=attempts,
            )
            status = trial.status if stored else TrialStatus.CANCELLED  # lost the race to a cancel
            run_id = trial.mlflow_run_id
        if run_id and ctx.tracking:  # once the freed worker runs the next trial: MLflow's latency is not idle time
            ctx.defer(ctx.tracking.end_trial, run_id, status, reason if stored else "cancelled")
        shutil.rmtree(ckpt, ignore_errors=True)  # ended: nothing left to resume

    def stop(self, ctx: Context, work: Work, handle: Any) -> None:
        ctx.backend.kill_trial(trial_actor_name(work.id))


class ProbeJob:
    """A probe: a Ray task running workers.probe on the spec's task and model."""

    kind = "probe"

    def ready(self, ctx: Context, s: Session) -> Iterator[tuple[Probe, SweepSpec, None]]:
        for probe in s.scalars(select(Probe).where(Probe.status == ProbeStatus.QUEUED).order_by(Probe.created_at)):
            yield probe, ctx.store.spec(probe), None

    def launch(self, ctx: Context, s: Session, probe: Probe, spec: SweepSpec, _: None) -> Any | None:
        plan = plan_trials(spec)[0]  # task, model and sampling settings; G and B are unused
        config = TrialConfig.from_spec(spec, plan, ctx.settings.model_cache_dir).to_dict()
        if not transition(s, probe, ProbeStatus.RUNNING):
            return None
        res = spec.resources
        return ctx.backend.start_task(
            run_probe_task, (config, spec.probe.model_dump()), res.cpus_per_trial, res.gpus_per_trial, 0
        )

    def collect(self, ctx: Context, work: Work, outcome: Outcome) -> None:
        with ctx.store.session() as s:
            probe = s.get(Probe, work.id)
            ok = outcome.error is None
            result = finite_or_none(outcome.value) if ok else None
            transition(s, probe, ProbeStatus.SUCCEEDED if ok else ProbeStatus.FAILED, error=outcome.error, result=result)
            if ctx.tracking and ok:
                probe.mlflow_run_id = ctx.safe(ctx.tracking.log_probe, probe.id, ctx.store.spec(probe), outcome.value)

    def prepare(self, ctx: Context, rows: list) -> None:
        """Nothing to make ahead."""

    def stop(self, ctx: Context, work: Work, handle: Any) -> None:
        ctx.backend.cancel(handle)


class TuningJob:
    """The lr search at one (G, B) of a sweep with tune_lr (workers.tune_lr): a Ray task, each lr trial a run."""

    kind = "tune"

    def __init__(self, record_study: Callable[[str, int, int, dict], None]) -> None:
        self.record_study = record_study  # copies a finished search into Optuna (service.scheduler.adaptive)

    def ready(self, ctx: Context, s: Session) -> Iterator[tuple[LrTuning, SweepSpec, None]]:
        ready = (Sweep.status == SweepStatus.RUNNING, LrTuning.status == TuningStatus.PENDING)
        rows = s.execute(select(LrTuning, Sweep).join(Sweep).where(*ready).order_by(Sweep.created_at, LrTuning.created_at)).all()
        for tuning, sweep in rows:
            yield tuning, ctx.store.spec(sweep), None

    def launch(self, ctx: Context, s: Session, tuning: LrTuning, spec: SweepSpec, _: None) -> Any | None:
        plan = TrialPlan(tuning.group_size, tuning.samples_per_step, spec.seeds[0])
        config = TrialConfig.from_spec(spec, plan, ctx.settings.model_cache_dir).to_dict()
        tune = {**spec.tune_lr.model_dump(), "seed": spec.seeds[0]}
        if not transition(s, tuning, TuningStatus.RUNNING):
            return None
        sweep = tuning.sweep
        args = (config, tune, ctx.tracking.uri if ctx.tracking else None, sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id)
        res = spec.resources
        return ctx.backend.start_task(run_tune_lr, args, res.cpus_per_trial, res.gpus_per_trial, ctx.settings.trial_retries)

    def collect(self, ctx: Context, work: Work, outcome: Outcome) -> None:
        """Store the tuned lr; copy the search into an Optuna study of the controller's database (so
        optuna-dashboard shows it) and the best lr onto the sweep's parent run. A cancelled search's lr
        runs that its killed task left RUNNING end KILLED."""
        result = outcome.value if outcome.error is None else None
        with ctx.store.session() as s:
            tuning = s.get(LrTuning, work.id)
            to = TuningStatus.SUCCEEDED if outcome.error is None else TuningStatus.FAILED
            values = {
                "error": outcome.error,
                "best_lr": result.get("best_lr") if result else None,
                "result": finite_or_none(result) if result is not None else None,
            }
            stored = tuning.status == TuningStatus.RUNNING and transition(s, tuning, to, **values)  # not after a cancel
            sweep_id, g, b, best = tuning.sweep_id, tuning.group_size, tuning.samples_per_step, tuning.best_lr
            parent = tuning.sweep.mlflow_parent_run_id
        if not stored:  # cancelled
            if ctx.tracking and parent:
                ctx.safe(ctx.tracking.kill_tuning_runs, parent, g, b)
            return
        if result:  # after the store's commit: Optuna writes through its own connection
            self.record_study(sweep_id, g, b, result)
        if ctx.tracking and parent and best is not None:
            ctx.safe(ctx.tracking.log_values, parent, {f"tune_lr.best_lr.G{g}.B{b}": best})

    def prepare(self, ctx: Context, rows: list) -> None:
        """Nothing to make ahead."""

    def stop(self, ctx: Context, work: Work, handle: Any) -> None:
        ctx.backend.cancel(handle)
