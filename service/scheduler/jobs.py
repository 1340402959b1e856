"""The three kinds of work the scheduler runs (a trial, a probe, an lr tuning): what is ready, launch, collect.

Each kind lists the rows ready to start (in order), launches one on the backend and, once it
ended, stores its result and ends its MLflow runs. Every status write goes through
service.lifecycle, so a cancel that lands while a job finishes wins (its compare-and-set fails).
The loop (service.scheduler.loop) gives every kind the same free-resource check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.lifecycle import ProbeStatus, SweepStatus, TrialStatus, TuningStatus, is_running, transition
from service.scheduler.context import Context, Outcome, Work
from service.store import LrTuning, Probe, ProbeKind, Sweep, Trial
from sweeps import storage
from sweeps.engines import get_engine
from sweeps.finite import finite_or_none
from sweeps.spec import SweepSpec
from sweeps.trial import TrialConfig, TrialOutcome
from workers.entry import run_answer_task, run_probe_task, run_tune_lr, worker_starts

log = logging.getLogger("groupscale.scheduler")


def trial_actor_name(trial_id: str) -> str:
    return f"trial-{trial_id}"


def tuned_lrs(sweep: Sweep) -> dict[tuple[int, int], float] | None:
    """The tuned lr per (G, B) of a sweep, or None while its tuning phase runs ({} without tune_lr).
    A (G, B) whose search found nothing keeps the spec's lr."""
    if any(t.status in (TuningStatus.PENDING, TuningStatus.RUNNING) for t in sweep.lr_tunings):
        return None
    return {(t.group_size, t.samples_per_step): t.best_lr for t in sweep.lr_tunings if t.best_lr is not None}


@dataclass(frozen=True)
class Ready:
    """A row ready to start, read in a store transaction and launched after it (no network call inside one).

    id: the trial, probe or lr tuning; spec: its sweep's (or probe's) spec; sweep_id: its sweep (None: a probe);
    lr: a trial's tuned lr (None: the spec's); trial: a trial's plan and run fields, None for the other kinds;
    kind: a probe row's (a probe or an answer)."""

    id: str
    spec: SweepSpec
    sweep_id: str | None = None
    lr: float | None = None
    trial: TrialRow | None = None
    kind: ProbeKind = ProbeKind.PROBE


@dataclass(frozen=True)
class TrialRow:
    """What a trial's launch needs of its row and sweep."""

    group_size: int
    samples_per_step: int
    seed: int
    mlflow_run_id: str | None
    experiment_id: str | None
    parent_run_id: str | None
    task_key: str


class TrialJob:
    """A trial: run on a warm worker (workers.worker.TrialWorker, a detached named actor), logging into its
    own MLflow child run."""

    kind, table = "trial", Trial

    def ready(self, ctx: Context, s: Session) -> Iterator[Ready]:
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
                row = TrialRow(
                    trial.group_size,
                    trial.samples_per_step,
                    trial.seed,
                    trial.mlflow_run_id,
                    sweep.mlflow_experiment_id,
                    sweep.mlflow_parent_run_id,
                    sweep.task_name,
                )
                yield Ready(trial.id, ctx.store.spec(sweep), sweep.id, lrs.get((trial.group_size, trial.samples_per_step)), row)

    def launch(self, ctx: Context, ready: Ready) -> Any | None:
        """Start the trial; None (nothing started) when its MLflow run cannot be created yet or it was cancelled
        meanwhile. Its run is made before, and the worker started after, the transaction that marks it running."""
        row, spec = ready.trial, ready.spec
        assert row is not None
        ckpt = ctx.checkpoint_dir(ready.id)  # a rerun resumes from it
        config = TrialConfig.for_trial(
            spec, row.group_size, row.samples_per_step, row.seed, ctx.settings.model_cache_dir, ckpt, lr=ready.lr
        )
        run_id = row.mlflow_run_id  # a resume keeps its run
        resumed = bool(run_id)
        if ctx.tracking and row.parent_run_id and not run_id:
            run_id = ctx.take_run(ready.id)  # made ahead by prepare, if it was
            if not run_id:
                try:
                    run_id = ctx.tracking.start_trial(*self._run_args(ready, config.grpo.lr))
                except Exception:  # noqa: BLE001 - this trial waits for the next tick
                    log.exception("creating the MLflow run of trial %s failed; retrying later", ready.id)
                    return None
        with ctx.store.session() as s:
            trial = s.get(Trial, ready.id)
            trial.mlflow_run_id = run_id  # stored even when a cancel won: close_cancelled ends it
            started = trial.status == TrialStatus.PENDING and transition(
                s, trial, TrialStatus.RUNNING, attempts=trial.attempts + 1
            )  # a cancel may have landed while its run was made, or since ready() read it
            closed = trial.sweep.mlflow_closed
        if not started:
            if run_id and closed and ctx.tracking:  # close_cancelled has been and gone: this run is ours to end
                ctx.defer(ctx.tracking.kill, run_id)
            return None
        if resumed and ctx.tracking:  # ended KILLED by a stop of `up`: open again before the trial logs and ends it
            ctx.defer(ctx.tracking.reopen_trial, run_id)
        args = (config.to_dict(), ctx.tracking.uri if ctx.tracking else None, run_id)
        res = spec.resources  # what raises from here on, the launcher takes back (lifecycle.unlaunch)
        return ctx.backend.start_trial(
            trial_actor_name(ready.id), args, res.cpus_per_process, res.gpus_per_process, res.num_processes
        )

    def prepare(self, ctx: Context, rows: list[Ready]) -> None:
        """Create the MLflow runs of the trials to launch next (``rows``, in order) on the MLflow thread,
        while the running ones train: a freed worker then starts its next trial without waiting for MLflow."""
        if ctx.tracking is None:
            return
        for ready in rows:
            if ready.trial and ready.trial.parent_run_id and not ready.trial.mlflow_run_id:
                lr = ready.spec.grpo.lr if ready.lr is None else ready.lr
                ctx.prepare_run(ready.id, ctx.tracking.start_trial, *self._run_args(ready, lr))

    def adopt_runs(self, ctx: Context) -> None:
        """After a restart: a pending trial without a run takes the run made for it (tagged with its id), so that each
        trial keeps one run: made ahead or just before a crash but not stored (RUNNING), or ended KILLED and let go by
        a stop of `up` (the trial it ran, or the run made ahead for it, Scheduler.stop); launch opens it again."""
        if ctx.tracking is None:
            return
        with ctx.store.read() as s:
            waiting = s.execute(
                select(Trial.id, Sweep.mlflow_experiment_id, Sweep.mlflow_parent_run_id)
                .join(Sweep)
                .where(
                    Sweep.status == SweepStatus.RUNNING,
                    Trial.status == TrialStatus.PENDING,
                    Trial.mlflow_run_id.is_(None),
                    Sweep.mlflow_parent_run_id.is_not(None),
                    Sweep.mlflow_experiment_id.is_not(None),
                )
            ).all()
        made: dict[str, str] = {}
        for experiment_id, parent in {(e, p) for _, e, p in waiting}:
            made |= ctx.safe(ctx.tracking.unended_trial_runs, experiment_id, parent) or {}
        adopt = {trial_id: made[trial_id] for trial_id, _, _ in waiting if trial_id in made}
        if adopt:
            with ctx.store.session() as s:
                for trial in s.scalars(select(Trial).where(Trial.id.in_(adopt), Trial.mlflow_run_id.is_(None))):
                    trial.mlflow_run_id = adopt[trial.id]

    @staticmethod
    def _run_args(ready: Ready, lr: float) -> tuple:
        """Tracking.start_trial's arguments for this trial (``lr``: the one it trains with)."""
        row = ready.trial
        assert row is not None
        return (
            row.experiment_id,
            row.parent_run_id,
            ready.spec,
            ready.id,
            row.group_size,
            row.samples_per_step,
            row.seed,
            lr,
            row.task_key,  # the stored task_key: the data files are not read again
        )

    def collect(self, ctx: Context, work: Work, outcome: Outcome) -> None:
        """Store the trial's result and end its run. A worker that died more often than Ray restarts it
        (its restarts count over every trial it ran) sends the trial back to pending, to resume from its
        checkpoint on another worker, until the trial's own worker starts exceed GROUPSCALE_TRIAL_RETRIES."""
        with ctx.store.read() as s:
            spec = ctx.store.spec(s.get(Trial, work.id).sweep)
            fresh = get_engine(spec.engine).one_process_per_trial(spec)
        if outcome.died or fresh:  # gone for good (Ray's restarts used up), or vLLM's GPU memory: never reused
            ctx.backend.kill_trial(trial_actor_name(work.id))
        else:
            ctx.backend.release_trial(trial_actor_name(work.id))  # its worker stays warm for the next trial
        ckpt = ctx.checkpoint_dir(work.id)
        starts = worker_starts(ckpt)  # every start of a worker process on this trial, restarts included
        retries = ctx.settings.trial_retries
        result: dict[str, Any] = outcome.value if outcome.error is None else {"status": TrialStatus.FAILED, "metrics": {}}
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
                TrialStatus(TrialOutcome(result["status"])),  # how the trial ended, as its trainer said
                reason=reason,
                seconds=result.get("seconds"),
                metrics=finite_or_none(result.get("metrics") or {}),
                attempts=attempts,
            )
            status = trial.status if stored else TrialStatus.CANCELLED  # lost the race to a cancel
            run_id = trial.mlflow_run_id
        if run_id and ctx.tracking:  # once the freed worker runs the next trial: MLflow's latency is not idle time
            ctx.defer(ctx.tracking.end_trial, run_id, status, reason if stored else "cancelled")
        storage.delete(ckpt)  # ended: nothing left to resume

    def stop(self, ctx: Context, work: Work, handle: Any) -> None:
        ctx.backend.kill_trial(trial_actor_name(work.id))


class _TaskJob:
    """What the kinds run as a Ray task share: nothing to make ahead, stopped by cancelling the task."""

    def prepare(self, ctx: Context, rows: list) -> None:
        """Nothing to make ahead."""

    def stop(self, ctx: Context, work: Work, handle: Any) -> None:
        ctx.backend.cancel(handle)


class ProbeJob(_TaskJob):
    """A probe or an answer (ProbeKind): a Ray task running workers.probe, or workers.answers, on the spec; what it
    reports as it runs (its stages: workers.progress) is stored in the row's ``progress``."""

    kind, table = "probe", Probe

    def __init__(self) -> None:
        self._stored: dict[str, dict] = {}  # job id -> the progress last written to its row

    def record_progress(self, ctx: Context, inflight: dict[Any, Work]) -> None:
        """Store what the running probes and answers reported last, where it changed (one backend read, then one
        transaction); called before their end is collected, so a job that ended keeps its last stages."""
        handles = [h for h, w in inflight.items() if w.kind == self.kind]
        if not handles:
            return
        latest = {inflight[h].id: p for h, p in ctx.backend.progress(handles).items()}
        changed = {job_id: p for job_id, p in latest.items() if self._stored.get(job_id) != p}
        if not changed:
            return
        with ctx.store.session() as s:
            for job_id, progress in changed.items():
                row = s.get(Probe, job_id)
                if row is not None and is_running(row):
                    row.progress = progress
        self._stored.update(changed)

    def ready(self, ctx: Context, s: Session) -> Iterator[Ready]:
        for probe in s.scalars(select(Probe).where(Probe.status == ProbeStatus.QUEUED).order_by(Probe.created_at)):
            yield Ready(probe.id, ctx.store.spec(probe), kind=ProbeKind(probe.kind))

    def launch(self, ctx: Context, ready: Ready) -> Any | None:
        spec = ready.spec
        if ready.kind == ProbeKind.ANSWER:
            fn, args = run_answer_task, (spec.model_dump(mode="json"), str(ctx.settings.model_cache_dir))
        else:
            config = TrialConfig.first_of(spec, ctx.settings.model_cache_dir).to_dict()  # task, model, sampling; G, B unused
            fn, args = run_probe_task, (config, spec.probe.model_dump())
        with ctx.store.session() as s:
            if not transition(s, s.get(Probe, ready.id), ProbeStatus.RUNNING):
                return None
        return _start_task(ctx, fn, args, spec.resources, 0, report=True)

    def collect(self, ctx: Context, work: Work, outcome: Outcome) -> None:
        """Log a succeeded probe's MLflow run (before, outside the transaction), then store its status, result and
        run together: a probe read as succeeded already names its run, and its result says where (``mlflow``:
        Tracking.log_probe's experiment, experiment_id, run_id and url)."""
        ok = outcome.error is None
        where = None
        self._stored.pop(work.id, None)
        if ctx.tracking and ok:
            with ctx.store.read() as s:
                row = s.get(Probe, work.id)
                spec, kind = ctx.store.spec(row), ProbeKind(row.kind)
            where = ctx.safe(ctx.tracking.log_probe, work.id, spec, outcome.value, kind)
        with ctx.store.session() as s:
            probe = s.get(Probe, work.id)
            result = finite_or_none({**outcome.value, **({"mlflow": where} if where else {})}) if ok else None
            status = ProbeStatus.SUCCEEDED if ok else ProbeStatus.FAILED
            run_id = where["run_id"] if where else None
            transition(s, probe, status, error=outcome.error, result=result, mlflow_run_id=run_id)


class TuningJob(_TaskJob):
    """The lr search at one (G, B) of a sweep with tune_lr (workers.tune_lr): a Ray task, each lr trial a run."""

    kind, table = "tune", LrTuning

    def __init__(self, record_study: Callable[[str, int, int, dict], None]) -> None:
        self.record_study = record_study  # copies a finished search into Optuna (service.scheduler.adaptive)

    def ready(self, ctx: Context, s: Session) -> Iterator[Ready]:
        ready = (Sweep.status == SweepStatus.RUNNING, LrTuning.status == TuningStatus.PENDING)
        rows = s.execute(select(LrTuning, Sweep).join(Sweep).where(*ready).order_by(Sweep.created_at, LrTuning.created_at)).all()
        for tuning, sweep in rows:
            yield Ready(tuning.id, ctx.store.spec(sweep), sweep.id)

    def launch(self, ctx: Context, ready: Ready) -> Any | None:
        """Start the search; None when a cancel came first. Its arguments are made before it is marked running (what
        raises there leaves it pending)."""
        spec = ready.spec
        with ctx.store.read() as s:
            tuning = s.get(LrTuning, ready.id)
            g, b, sweep = tuning.group_size, tuning.samples_per_step, tuning.sweep
            experiment_id, parent = sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id
        config = TrialConfig.for_trial(spec, g, b, spec.seeds[0], ctx.settings.model_cache_dir).to_dict()
        tune = {**spec.tune_lr.model_dump(), "seed": spec.seeds[0]}
        args = (config, tune, ctx.tracking.uri if ctx.tracking else None, experiment_id, parent)
        with ctx.store.session() as s:
            tuning = s.get(LrTuning, ready.id)
            if tuning.status != TuningStatus.PENDING or not transition(s, tuning, TuningStatus.RUNNING):
                return None  # cancelled since ready() read it
        return _start_task(ctx, run_tune_lr, args, spec.resources, ctx.settings.trial_retries)

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


def _start_task(ctx: Context, fn: Callable, args: tuple, res: Any, retries: int, report: bool = False) -> Any:
    """``fn(*args)`` as a Ray task of one process for a row just marked running (after that transaction's commit); when
    the backend refuses it, the launcher takes the row back (lifecycle.unlaunch). ``report``: ``fn`` takes a ``report``
    callback (workers.progress), read by Backend.progress."""
    return ctx.backend.start_task(fn, args, res.cpus_per_process, res.gpus_per_process, retries, report=report)
