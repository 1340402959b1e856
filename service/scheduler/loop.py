"""The scheduling loop: one tick admits sweeps (service.scheduler.admission), collects and cancels work and fits ended
sweeps (collection), launches ready work within free resources (launching, on the cluster's view); reconcile.

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
from typing import Any

from sqlalchemy import select

from service.lifecycle import TrialStatus, transition
from service.scheduler.adaptive import AdaptiveDriver
from service.scheduler.admission import Admission
from service.scheduler.collection import Collection
from service.scheduler.context import Backend, Context, Work
from service.scheduler.faults import Faults
from service.scheduler.jobs import ProbeJob, TrialJob, TuningJob
from service.scheduler.launching import Cluster, Launcher
from service.scheduler.reconcile import reconcile
from service.settings import Settings
from service.store import Store, Trial
from service.tracking import Tracking

log = logging.getLogger("groupscale.scheduler")
STOP_S = 10.0  # stop() waits at most this long for the scheduling thread, and as long for MLflow's pending calls


class Scheduler:
    """Owns the backend connection and the scheduling thread; ``tick`` is one pass (the unit tests call it). Its jobs:
    ``admission``, ``launcher`` and ``collection``, over the ``cluster``'s view and the work in flight (``inflight``)."""

    def __init__(self, store: Store, settings: Settings, tracking: Tracking | None, backend: Backend | None = None) -> None:
        if backend is None:
            from service.scheduler.ray_backend import RayBackend

            backend = RayBackend(settings)
        self.ctx = Context(store, settings, tracking, backend)
        self.cluster = Cluster(backend)
        self.adaptive = AdaptiveDriver(self.ctx)
        self.trials, self.probes = TrialJob(), ProbeJob()
        self.jobs = {"probe": self.probes, "tune": TuningJob(self.adaptive.record_tuning), "trial": self.trials}
        self.inflight: dict[Any, Work] = {}
        self.faults = Faults()  # what keeps failing: /v1/health shows it
        self.admission = Admission(self.ctx, self.faults)
        self.launcher = Launcher(self.ctx, self.cluster, self.inflight, self.faults)
        self.collection = Collection(self.ctx, self.jobs, self.inflight, self.adaptive)
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by the API when it stored new work: no poll sleep before it starts
        self._thread: threading.Thread | None = None

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

    def missing_shapes(self) -> list[str]:
        """The trial shapes no alive node holds that trials have waited for over a minute, with how many wait
        (/v1/health): a shape the cluster lost (its only node died) or, with an autoscaler, one it has not added yet."""
        return self.launcher.waiting.missing(self.cluster.nodes())

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
        self.admission.admit()
        self.collection.stop_cancelled()
        if self.inflight:  # collect first: a trial's worker, freed, takes the next trial of its shape at once
            ended = self.ctx.backend.wait(list(self.inflight), wait_s)
            self.probes.record_progress(self.ctx, self.inflight)  # before collecting: ended jobs' last stages too
            for handle in ended:
                self.collection.collect(handle)
        self.launcher.place()  # before launching: what waits for a node holds nothing, and idle workers make room for it
        self.admission.fail_over_budget()  # before launching: a spent budget's pending trials never start
        self.launcher.launch(self.jobs["probe"])
        self.launcher.launch(self.jobs["tune"])
        self.adaptive.advance()
        self.launcher.launch(self.jobs["trial"])
        self.ctx.run_deferred()  # the collected trials' runs end (MLflow thread) while their workers run the next ones
        self.ctx.backend.reap_idle(self.ctx.settings.worker_idle_s)
        self.collection.close_cancelled()
        self.collection.finish()
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
            n = 0 if self.ctx.settings.ray_address else min(int(self.cluster.resources().get("CPU", 0)), 4)
        self.ctx.backend.prewarm(n, 1.0, 0.0)

    def reconcile(self) -> None:
        """After a restart (service.scheduler.reconcile): re-attach to live trials, resume the others."""
        self.inflight.update(reconcile(self.ctx, self.trials))
