"""The scheduling loop: admit sweeps, launch ready work within free resources, collect, cancel, fit, reconcile.

Execution shape (README "How a sweep runs"): a thread of the controller ticks every
``poll_interval_s``. A tick admits queued sweeps (their MLflow parent run, their lr tunings and
grid trials), stops the work of cancelled sweeps, collects the work that ended (first, so that a
freed warm worker takes the next trial of its shape), launches ready work of each kind
(service.scheduler.jobs: probes, lr tunings, trials; adaptive sweeps get their trials from
service.scheduler.adaptive first) while the cluster has the resources free, ends the MLflow runs
of the trials it collected, stops the warm workers idle for longer than GROUPSCALE_WORKER_IDLE_S,
closes the MLflow parent run of a cancelled sweep once none of its work is in flight, and fits the
law when a sweep's trials have all ended. The cluster is a Backend (service.scheduler.ray_backend on
Ray; a fake in the unit tests).

Trials outlive the controller process: on a cluster of its own (RAY_ADDRESS) a restarted controller
re-attaches to the trials its workers still run (named actors) and collects what they finished meanwhile;
a trial whose actor is gone or dead goes back to pending and resumes from its checkpoint, logging
into the same MLflow run, so each trial has exactly one run (after a clean stop of a local head,
whose trials cannot go on, their runs end KILLED and the resumed trials get new ones).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from sqlalchemy import func, select

from service import lifecycle
from service.lifecycle import (
    TRIAL_TERMINAL,
    TRIAL_USABLE,
    TUNING_TERMINAL,
    SweepStatus,
    TrialStatus,
    TuningStatus,
    transition,
)
from service.results import fit_from_trials, report_about
from service.scheduler.adaptive import AdaptiveDriver
from service.scheduler.context import Backend, Context, Outcome, Work
from service.scheduler.faults import Faults
from service.scheduler.jobs import ProbeJob, TrialJob, TuningJob, trial_actor_name
from service.scheduler.placement import Waiting, fits, store_reasons
from service.scheduler.reconcile import reconcile
from service.settings import Settings
from service.store import LrTuning, Store, Sweep, Trial
from service.tracking import Tracking
from sweeps.planner import plan_trials

log = logging.getLogger("groupscale.scheduler")
RESOURCES_TTL_S = 5.0  # the cluster's total resources are read again after this long
STOP_S = 10.0  # stop() waits at most this long for the scheduling thread, and as long for MLflow's pending calls
LOOKAHEAD = 8  # at most this many waiting trials get their MLflow run made ahead (one per running trial)


class Scheduler:
    """Owns the backend connection and the scheduling thread; ``tick`` is one pass (the unit tests call it)."""

    def __init__(self, store: Store, settings: Settings, tracking: Tracking | None, backend: Backend | None = None) -> None:
        if backend is None:
            from service.scheduler.ray_backend import RayBackend

            backend = RayBackend(settings)
        self.ctx = Context(store, settings, tracking, backend)
        self.adaptive = AdaptiveDriver(self.ctx)
        self.trials, self.probes = TrialJob(), ProbeJob()
        self.jobs = {"probe": self.probes, "tune": TuningJob(self.adaptive.record_tuning), "trial": self.trials}
        self.inflight: dict[Any, Work] = {}
        self._stopping: set[Any] = set()  # handles of cancelled work being stopped
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by the API when it stored new work: no poll sleep before it starts
        self._thread: threading.Thread | None = None
        self._resources: dict[str, float] = {}
        self._nodes: list[dict[str, float]] = []
        self._resources_at = 0.0
        self.waiting = Waiting()  # the in-flight trials whose workers wait for a node (service.scheduler.placement)
        self.faults = Faults()  # what keeps failing: /v1/health shows it

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Connect and start the scheduling thread, which reconciles first: the web server's startup makes no
        call that can wait for long (a stack whose MLflow is down stops at once on Ctrl-C)."""
        self.ctx.backend.connect()
        self._thread = threading.Thread(target=self._loop, name="groupscale-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop scheduling. On a Ray cluster of its own (RAY_ADDRESS), running trials go on and the next
        controller re-attaches to them. With the local head, which stops with the controller, they go
        back to pending (the next start resumes them from their checkpoints) and their MLflow runs end
        KILLED rather than staying RUNNING."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=STOP_S)  # a tick stuck in an MLflow retry is left behind (a daemon thread)
        self.ctx.drain(timeout_s=STOP_S)  # the collected trials' ends, and the runs being made ahead
        runs = [self.ctx.take_run(t, wait=False) for t in self.ctx.prepared()]  # made ahead for trials that did not start
        if not self.ctx.settings.ray_address:
            running = [w.id for w in self.inflight.values() if w.kind == "trial"]
            with self.ctx.store.session() as s:
                stopped = s.scalars(select(Trial).where(Trial.id.in_(running), Trial.status == TrialStatus.RUNNING)).all()
                runs += [t.mlflow_run_id for t in stopped]
                for trial in stopped:
                    transition(s, trial, TrialStatus.PENDING, mlflow_run_id=None)
        for run_id in runs:
            if run_id and self.ctx.tracking:
                self.ctx.defer(self.ctx.tracking.kill, run_id)
        if not self.ctx.drain(timeout_s=STOP_S):  # MLflow down: its calls retry for minutes, the stop does not wait
            log.warning("MLflow calls still pending at shutdown: some runs may stay RUNNING")
        self.inflight.clear()
        self.ctx.backend.disconnect()

    def cluster_resources(self) -> dict[str, float]:
        """Total cluster resources (cached for RESOURCES_TTL_S)."""
        self._read_cluster()
        return self._resources

    def cluster_nodes(self) -> list[dict[str, float]]:
        """Each alive node's total resources (cached for RESOURCES_TTL_S): a trial's shape must fit one of them."""
        self._read_cluster()
        return self._nodes

    def _read_cluster(self) -> None:
        """The alive nodes, once per RESOURCES_TTL_S; the cluster's totals are their sum (Ray's cluster_resources)."""
        if time.monotonic() - self._resources_at > RESOURCES_TTL_S or not self._resources:
            self._nodes = self.ctx.backend.nodes() if self.ctx.backend.connected() else []
            totals: dict[str, float] = {}
            for node in self._nodes:
                for key, value in node.items():
                    totals[key] = totals.get(key, 0.0) + value
            self._resources = totals
            self._resources_at = time.monotonic()

    def pool(self) -> dict[str, int]:
        """The warm workers: how many run a trial, are idle, or are still starting."""
        return self.ctx.backend.pool() if self.ctx.backend.connected() else {}

    def run_task(self, fn: Any, args: tuple, timeout_s: float) -> Any:
        """``fn(*args)`` as a cluster task that holds no CPU or GPU (a check at submit), its return value.

        Raises:
            TimeoutError: it did not end within timeout_s (it is cancelled).
            Exception: the task's own error, or Ray's when its worker died.
        """
        backend = self.ctx.backend
        handle = backend.start_task(fn, args, 0, 0, 0)
        if not backend.wait([handle], timeout_s):
            backend.cancel(handle)
            raise TimeoutError(f"the cluster task did not end within {timeout_s:g} s")
        return backend.result(handle)

    def healthy(self) -> bool:
        return self.ctx.backend.connected() and bool(self.cluster_resources().get("CPU"))

    def missing_shapes(self) -> list[str]:
        """The trial shapes no alive node holds that trials have waited for over a minute, with how many wait
        (/v1/health): a shape the cluster lost (its only node died) or, with an autoscaler, one it has not added yet."""
        return self.waiting.missing(self.cluster_nodes())

    # -- the loop ------------------------------------------------------------------------------
    def _loop(self) -> None:
        reconciled = False
        while not self._stop.is_set():
            try:
                if not reconciled:
                    self.reconcile()
                    self.prewarm()
                    reconciled = True
                self.tick()
                self.faults.clear("the scheduler's tick")
            except Exception as e:  # noqa: BLE001 - the loop must survive any one failure; it is logged and counted
                self.faults.record("the scheduler's tick" if reconciled else "the scheduler's reconcile", e)
                self._stop.wait(self.ctx.settings.poll_interval_s)

    def tick(self, wait_s: float | None = None) -> None:
        """One pass; waits at most ``wait_s`` (default poll_interval_s) for work to end."""
        wait_s = self.ctx.settings.poll_interval_s if wait_s is None else wait_s
        self._wake.clear()  # a wake from here on ends this tick's sleep
        self.admit()
        self.stop_cancelled()
        if self.inflight:  # collect first: a trial's worker, freed, takes the next trial of its shape at once
            ended = self.ctx.backend.wait(list(self.inflight), wait_s)
            self.probes.record_progress(self.ctx, self.inflight)  # before collecting: ended jobs' last stages too
            for handle in ended:
                self.collect(handle)
        self.place()  # before launching: what waits for a node holds nothing, and idle workers make room for it
        self.fail_over_budget()  # before launching: a spent budget's pending trials never start
        self.launch(self.jobs["probe"])
        self.launch(self.jobs["tune"])
        self.adaptive.advance()
        self.launch(self.jobs["trial"])
        self.ctx.run_deferred()  # the collected trials' runs end (MLflow thread) while their workers run the next ones
        self.ctx.backend.reap_idle(self.ctx.settings.worker_idle_s)
        self.close_cancelled()
        self.finish()
        if not self.inflight and wait_s:
            self._wake.wait(wait_s)

    def wake(self) -> None:
        """New work was committed (a sweep, a probe, a cancel): the next tick starts now."""
        self._wake.set()

    def prewarm(self) -> None:
        """Start the idle warm workers of GROUPSCALE_WARM_WORKERS (default: on a local head, one per CPU, at
        most 4; none on a cluster at RAY_ADDRESS), of the default shape (1 CPU, no GPU)."""
        n = self.ctx.settings.warm_workers
        if n is None:
            n = 0 if self.ctx.settings.ray_address else min(int(self.cluster_resources().get("CPU", 0)), 4)
        self.ctx.backend.prewarm(n, 1.0, 0.0)

    def reconcile(self) -> None:
        """After a restart (service.scheduler.reconcile): re-attach to live trials, resume the others."""
        self.inflight.update(reconcile(self.ctx, self.trials))

    def admit(self) -> None:
        """Queued sweeps start: their MLflow parent run (made outside any transaction), their lr tunings and
        (grid) trials are created."""
        tracking, store = self.ctx.tracking, self.ctx.store
        with store.read() as s:
            queued = [
                (w.id, store.spec(w), w.task_name, w.mlflow_parent_run_id)
                for w in store.sweeps_with_status(s, SweepStatus.QUEUED)
            ]
        for sweep_id, spec, key, parent in queued:
            runs = None
            if tracking and not parent:
                try:
                    runs = tracking.start_sweep(sweep_id, spec, key)
                except Exception as e:  # noqa: BLE001 - the sweep stays queued, saying why; the rest of the tick goes on
                    self._waits(sweep_id, e)
                    continue
            self.faults.clear(f"admitting sweep {sweep_id}")
            with store.session() as s:
                sweep = s.get(Sweep, sweep_id)
                if runs:  # stored even when a cancel came first: close_cancelled ends the run
                    sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id = runs
                if sweep.status != SweepStatus.QUEUED:
                    continue
                sweep.error = None  # why it waited, if it did
                if spec.tune_lr is not None and not sweep.lr_tunings:
                    for b in spec.samples_per_step:
                        s.add_all(LrTuning(sweep_id=sweep.id, group_size=g, samples_per_step=b) for g in spec.group_sizes)
                if spec.mode == "grid" and not sweep.trials:  # adaptive sweeps get theirs from the study
                    s.add_all(
                        Trial(
                            sweep_id=sweep.id,
                            position=i,
                            group_size=p.group_size,
                            samples_per_step=p.samples_per_step,
                            seed=p.seed,
                        )
                        for i, p in enumerate(plan_trials(spec))
                    )
                transition(s, sweep, SweepStatus.RUNNING)

    def _waits(self, sweep_id: str, error: Exception) -> None:
        """A queued sweep's MLflow parent run could not be made: counted, and said in the sweep's ``error``."""
        fault = self.faults.record(f"admitting sweep {sweep_id}", error)
        with self.ctx.store.session() as s:
            sweep = s.get(Sweep, sweep_id)
            if sweep is not None and sweep.status == SweepStatus.QUEUED:
                sweep.error = f"queued: its MLflow parent run could not be made ({fault.count} tries): {fault.message}"

    # -- launching -------------------------------------------------------------------------------
    def place(self) -> None:
        """Find the in-flight trials whose workers wait for a node (new, or restarted after their node died): they hold
        no resources; idle warm workers are stopped at once so that Ray can place them, and their reasons say so."""
        trials = {trial_actor_name(w.id): w for w in self.inflight.values() if w.kind == "trial"}
        late = {trials[n].id: s for n, s in self.ctx.backend.unplaced().items() if n in trials}
        nodes = self.cluster_nodes()
        late |= self.waiting.no_node([w for w in trials.values() if not fits(nodes, w.cpus, w.gpus, w.processes)], late)
        self.waiting.seconds = late
        self.waiting.shapes = {w.id: (w.cpus, w.gpus, w.processes) for w in trials.values() if w.id in late}
        roomy = any(fits(nodes, *self.waiting.shapes[t]) for t in late)  # idle workers may hold its room
        if roomy and any(v > 0 for v in self.ctx.backend.idle_resources().values()):
            self.ctx.backend.reap_idle(0)  # every idle worker: which node each holds is Ray's to know, not ours
        changed = self.waiting.reasons()
        if changed:
            with self.ctx.store.session() as s:
                store_reasons(s, changed)

    def _free(self) -> tuple[float, float]:
        """CPUs and GPUs free: what the cluster reports available (other users' work on a shared cluster
        shows there), but never more than its total less what this controller's work holds or will be placed on
        first (the cluster's figure lags a launch by a moment; a worker waiting for a node that some alive node
        holds keeps its room, one waiting for a shape the cluster lost does not)."""
        total, avail = self.cluster_resources(), self.ctx.backend.available_resources()
        idle = self.ctx.backend.idle_resources()  # warm workers: reused by a trial of their shape, or evicted
        avail = {k: avail.get(k, 0.0) + idle.get(k, 0.0) for k in ("CPU", "GPU")}
        nodes = self.cluster_nodes()
        held = [w for w in self.inflight.values() if w.id not in self.waiting.seconds or fits(nodes, w.cpus, w.gpus, w.processes)]
        ours = [sum(w.cpus for w in held), sum(w.gpus for w in held)]
        return tuple(max(min(total.get(k, 0.0) - used, avail.get(k, 0.0)), 0.0) for k, used in zip(("CPU", "GPU"), ours))  # type: ignore[return-value]

    def launch(self, job: TrialJob | ProbeJob | TuningJob) -> None:
        """Start the job kind's ready rows in order while resources are free; with nothing in flight one
        always starts (the cluster queues it). A row that does not fit holds back the later rows of its shape or
        larger (order holds within a shape), never those of a smaller shape: a sweep waiting for a GPU does not
        stop a CPU sweep behind it. With an autoscaler, one trial of a shape no node holds starts as demand it sees.
        Work that no idle warm worker can take first evicts the idle workers whose resources it needs."""
        started = {w.id for w in self.inflight.values()}
        with self.ctx.store.read() as s:
            rows = [r for r in job.ready(self.ctx, s) if r.id not in started]
        free: tuple[float, float] | None = None
        blocked: list[tuple[float, float]] = []
        for i, ready in enumerate(rows):
            res = ready.spec.resources
            procs = res.num_processes if job.kind == "trial" else 1  # a probe or an lr tuning runs on one process
            cpus, gpus = procs * res.cpus_per_process, procs * res.gpus_per_process
            if any(cpus >= c - 1e-9 and gpus >= g - 1e-9 for c, g in blocked):
                continue
            free = free or self._free()
            if self.inflight and (cpus > free[0] + 1e-9 or gpus > free[1] + 1e-9) and not self._demand(cpus, gpus, procs):
                if not blocked:  # the next to start, made ready
                    running = sum(1 for w in self.inflight.values() if w.kind == job.kind)
                    job.prepare(self.ctx, rows[i : i + min(running, LOOKAHEAD)])
                blocked.append((cpus, gpus))
                continue
            if not (job.kind == "trial" and procs == 1 and self.ctx.backend.has_idle(cpus, gpus)):
                self._make_room(cpus, gpus, free)
            handle = job.launch(self.ctx, ready)
            if handle is None:  # cancelled meanwhile, or its MLflow run could not be made: next tick
                continue
            self.inflight[handle] = Work(job.kind, ready.id, ready.sweep_id, cpus, gpus, procs)
            free = (max(free[0] - cpus, 0.0), max(free[1] - gpus, 0.0))  # a GPU trial waiting as demand holds no GPU

    def _demand(self, cpus: float, gpus: float, processes: int) -> bool:
        """With GROUPSCALE_AUTOSCALING, whether to start a trial of a shape that no alive node holds so that it waits as
        demand the autoscaler sees: yes while none of that shape is in flight (one asks; the node it brings takes the
        next ones through the free resources)."""
        if not self.ctx.settings.autoscaling or fits(self.cluster_nodes(), cpus, gpus, processes):
            return False
        return not any((w.cpus, w.gpus, w.processes) == (cpus, gpus, processes) for w in self.inflight.values())

    def _make_room(self, cpus: float, gpus: float, free: tuple[float, float]) -> None:
        """Evict idle warm workers until new work of this size fits beside them: ``free`` counts what idle
        workers hold, so without them there is ``free - idle``."""
        idle = self.ctx.backend.idle_resources()
        short = (cpus - (free[0] - idle.get("CPU", 0.0)), gpus - (free[1] - idle.get("GPU", 0.0)))
        if short[0] > 1e-9 or short[1] > 1e-9:
            self.ctx.backend.evict_idle(max(short[0], 0.0), max(short[1], 0.0))

    # -- collecting, cancelling, finishing ----------------------------------------------------
    def collect(self, handle: Any) -> None:
        work = self.inflight.pop(handle)
        stopped = handle in self._stopping
        self._stopping.discard(handle)
        try:
            outcome = Outcome(value=self.ctx.backend.result(handle))
        except Exception as e:  # noqa: BLE001 - failed work is data, not a controller crash
            reason, died = self.ctx.backend.describe(e)
            if not stopped:  # a cancel is not an error: no traceback for work it stopped
                log.warning("%s %s failed", work.kind, work.id, exc_info=e)
            outcome = Outcome(error=reason, died=died)
        self.jobs[work.kind].collect(self.ctx, work, outcome)

    def stop_cancelled(self) -> None:
        """Stop the in-flight work that a cancel ended (lifecycle.cancel_sweep marked it cancelled)."""
        candidates = [(h, w) for h, w in self.inflight.items() if h not in self._stopping and w.kind in ("trial", "tune")]
        if not candidates:
            return
        with self.ctx.store.read() as s:
            trials = {w.id for _, w in candidates if w.kind == "trial"}
            tunings = {w.id for _, w in candidates if w.kind == "tune"}
            cancelled = set(s.scalars(select(Trial.id).where(Trial.id.in_(trials), Trial.status == TrialStatus.CANCELLED)))
            cancelled |= set(
                s.scalars(select(LrTuning.id).where(LrTuning.id.in_(tunings), LrTuning.status == TuningStatus.CANCELLED))
            )
        for handle, work in candidates:
            if work.id in cancelled:
                self._stopping.add(handle)
                self.jobs[work.kind].stop(self.ctx, work, handle)

    def fail_over_budget(self) -> None:
        """A running sweep with more failed trials than its failure budget (spec.max_failed_trials) ends failed,
        saying how many failed and their first causes; its other trials are cancelled (the running ones stopped)."""
        store = self.ctx.store
        with store.read() as s:  # one count per tick; a write transaction only for a sweep past its budget
            counts = s.execute(
                select(Sweep, func.count(Trial.id))
                .join(Trial)
                .where(Sweep.status == SweepStatus.RUNNING, Trial.status == TrialStatus.FAILED)
                .group_by(Sweep.id)
            ).all()
            over = [sweep.id for sweep, failed in counts if failed > store.spec(sweep).failure_budget]
        for sweep_id in over:
            with store.session() as s:
                sweep = s.get(Sweep, sweep_id)
                budget = store.spec(sweep).failure_budget
                failed = [t for t in sweep.trials if t.status == TrialStatus.FAILED]
                causes = "; ".join(list(dict.fromkeys(t.reason or "no reason given" for t in failed))[:3])
                error = f"{len(failed)} trials failed, more than max_failed_trials={budget}; the others were cancelled. "
                error += f"First causes: {causes}"
                if lifecycle.fail_sweep(s, sweep, error[:4000]):
                    log.warning("sweep %s failed: %s", sweep.id, error)

    def close_cancelled(self) -> None:
        """End the MLflow parent run of each cancelled sweep KILLED (of a sweep whose failure budget was spent, FAILED),
        once none of its work is in flight (so every child run it owns has ended first); child runs a lost worker left
        RUNNING end KILLED too."""
        busy = {w.sweep_id for w in self.inflight.values()}
        tracking, store = self.ctx.tracking, self.ctx.store
        with store.read() as s:
            todo = [
                (w.id, w.name, w.mlflow_parent_run_id, [(t.id, t.mlflow_run_id) for t in w.trials], w.status)
                for w in store.sweeps_with_status(s, SweepStatus.CANCELLED, SweepStatus.FAILED)
                if not w.mlflow_closed and w.id not in busy
            ]
        for sweep_id, name, parent, trials, status in todo:
            self.ctx.drain()  # the child runs' own ends first
            if tracking and parent:
                for trial_id, stored in trials:
                    for run_id in (stored, self.ctx.take_run(trial_id)):  # a run made ahead, too
                        if run_id:
                            self.ctx.safe(tracking.kill, run_id)
                self.ctx.safe(tracking.end_sweep, parent, None, name, "KILLED" if status == SweepStatus.CANCELLED else "FAILED")
            with store.session() as s:
                s.get(Sweep, sweep_id).mlflow_closed = True

    def finish(self) -> None:
        """Sweeps whose trials and tunings have all ended (and, adaptive, whose study says stop) are fitted."""
        with self.ctx.store.session() as s:
            for sweep in self.ctx.store.sweeps_with_status(s, SweepStatus.RUNNING):
                if not sweep.trials or any(t.status not in TRIAL_TERMINAL for t in sweep.trials):
                    continue
                if any(t.status not in TUNING_TERMINAL for t in sweep.lr_tunings) or not self.adaptive.done(sweep):
                    continue
                transition(s, sweep, SweepStatus.FITTING)
        with self.ctx.store.read() as s:  # the fits are computed in a read transaction: no write waits for them
            fitting = [
                (w.id, w.name, w.mlflow_parent_run_id, self._fit(w), report_about(w))
                for w in self.ctx.store.sweeps_with_status(s, SweepStatus.FITTING)
            ]
        for sweep_id, name, parent, (fit, error), about in fitting:
            self._close(sweep_id, name, parent, fit, error, about)

    def _fit(self, sweep: Sweep) -> tuple[Any, str | None]:
        """(the law fit of a sweep whose trials have all ended, None) or (None, why it failed: no usable trial)."""
        if not any(t.status in TRIAL_USABLE for t in sweep.trials):
            reasons = sorted({t.reason or t.status for t in sweep.trials})
            return None, "no trial finished: " + "; ".join(reasons)[:2000]
        return fit_from_trials(sweep.trials, self.ctx.store.spec(sweep)), None

    def _close(self, sweep_id: str, name: str, parent: str | None, fit: Any, error: str | None, about: dict) -> None:
        """Store a fitted sweep's end; its MLflow parent run ends first (after its children), outside the
        transaction (a cancel that lands meanwhile wins: close_cancelled then ends the run KILLED).
        ``about``: {spec, created, trials} of the sweep (service.results.report_about), for its report."""
        tracking = self.ctx.tracking
        self.ctx.drain()  # the child runs end before their parent
        if tracking and parent:
            if error is None:
                self.ctx.safe(tracking.end_sweep, parent, fit, f"{name}: {fit.status}", "FINISHED", about)
            else:
                self.ctx.safe(tracking.end_sweep, parent, None, name, "FAILED")
        with self.ctx.store.session() as s:
            sweep = s.get(Sweep, sweep_id)
            if error is None:
                closed = transition(s, sweep, SweepStatus.SUCCEEDED, fit=fit.model_dump(mode="json"))
            else:
                closed = transition(s, sweep, SweepStatus.FAILED, error=error)
            if closed:
                sweep.mlflow_closed = True
