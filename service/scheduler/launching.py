"""Launching: which ready work starts this tick, within the resources the cluster has free (its view: Cluster, its nodes
and resources read again every RESOURCES_TTL_S), and which in-flight trials wait for a node (service.scheduler.placement
says whether a shape fits and what a waiting trial's reason is). A launch that raises is that row's alone: it waits for
the next tick and, raising LAUNCH_TRIES times over LAUNCH_GRACE_S, fails saying why; the other rows launch meanwhile."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from service.lifecycle import TrialStatus, fail_unlaunched, unlaunch
from service.scheduler.context import Backend, Context, Work
from service.scheduler.faults import Faults
from service.scheduler.jobs import ProbeJob, TrialJob, TuningJob, trial_actor_name
from service.scheduler.placement import Waiting, fits, store_reasons

LOOKAHEAD = 8  # at most this many waiting trials get their MLflow run made ahead (one per running trial)
RESOURCES_TTL_S = 5.0  # the cluster's total resources are read again after this long
LAUNCH_TRIES = 3  # a row whose launch raised this many times in a row, and
LAUNCH_GRACE_S = 30.0  # for at least this long (a Ray head restarting refuses a while), fails with the reason


class Cluster:
    """The backend's nodes, resources and pool, cached (``read_at``: when they were last read)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._resources: dict[str, float] = {}
        self._nodes: list[dict[str, float]] = []
        self.read_at = 0.0

    def resources(self) -> dict[str, float]:
        """Total cluster resources (cached for RESOURCES_TTL_S)."""
        self._read()
        return self._resources

    def nodes(self) -> list[dict[str, float]]:
        """Each alive node's total resources (cached for RESOURCES_TTL_S): a trial's shape must fit one of them."""
        self._read()
        return self._nodes

    def _read(self) -> None:
        """The alive nodes, once per RESOURCES_TTL_S; the cluster's totals are their sum (Ray's cluster_resources)."""
        if time.monotonic() - self.read_at > RESOURCES_TTL_S or not self._resources:
            self._nodes = self.backend.nodes() if self.backend.connected() else []
            totals: Counter[str] = Counter()
            for node in self._nodes:
                totals.update(node)  # adds, zeros kept
            self._resources = dict(totals)
            self.read_at = time.monotonic()

    def pool(self) -> dict[str, int]:
        """The warm workers: how many run a trial, are idle, or are still starting."""
        return self.backend.pool() if self.backend.connected() else {}

    def run_task(self, fn: Any, args: tuple, timeout_s: float) -> Any:
        """``fn(*args)`` as a cluster task that holds no CPU or GPU (a check at submit), its return value.

        Raises:
            TimeoutError: it did not end within timeout_s (it is cancelled).
            Exception: the task's own error, or Ray's when its worker died.
        """
        handle = self.backend.start_task(fn, args, 0, 0, 0)
        if not self.backend.wait([handle], timeout_s):
            self.backend.cancel(handle)
            raise TimeoutError(f"the cluster task did not end within {timeout_s:g} s")
        return self.backend.result(handle)

    def healthy(self) -> bool:
        return self.backend.connected() and bool(self.resources().get("CPU"))


class Launcher:
    """Starts work on the cluster into ``inflight`` (handle -> Work, the scheduler's own) and keeps ``waiting``: the
    in-flight trials whose workers wait for a node."""

    def __init__(self, ctx: Context, cluster: Cluster, inflight: dict[Any, Work], faults: Faults) -> None:
        self.ctx, self.cluster, self.inflight, self.faults = ctx, cluster, inflight, faults
        self.waiting = Waiting()
        self.refused: dict[str, tuple[int, float]] = {}  # row id -> (launches that raised in a row, monotonic time of the first)

    def place(self) -> None:
        """Find the in-flight trials whose workers wait for a node (new, or restarted after their node died): they hold
        no resources; idle warm workers are stopped at once so that Ray can place them, and their reasons say so."""
        trials = {trial_actor_name(w.id): w for w in self.inflight.values() if w.kind == "trial"}
        late = {trials[n].id: s for n, s in self.ctx.backend.unplaced().items() if n in trials}
        nodes = self.cluster.nodes()
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
        total, avail = self.cluster.resources(), self.ctx.backend.available_resources()
        idle = self.ctx.backend.idle_resources()  # warm workers: reused by a trial of their shape, or evicted
        avail = {k: avail.get(k, 0.0) + idle.get(k, 0.0) for k in ("CPU", "GPU")}
        nodes = self.cluster.nodes()
        held = [w for w in self.inflight.values() if w.id not in self.waiting.seconds or fits(nodes, w.cpus, w.gpus, w.processes)]
        ours = [sum(w.cpus for w in held), sum(w.gpus for w in held)]
        return tuple(max(min(total.get(k, 0.0) - used, avail.get(k, 0.0)), 0.0) for k, used in zip(("CPU", "GPU"), ours))  # type: ignore[return-value]

    def launch(self, job: TrialJob | ProbeJob | TuningJob) -> None:
        """Start the job kind's ready rows in order while resources are free; with nothing in flight one
        always starts (the cluster queues it). A row that does not fit holds back the later rows of its shape or
        larger (order holds within a shape), never those of a smaller shape: a sweep waiting for a GPU does not
        stop a CPU sweep behind it. With an autoscaler, one trial of a shape no node holds starts as demand it sees.
        Work that no idle warm worker can take first evicts the idle workers whose resources it needs. A row whose
        launch raises is left for the next tick (``_refused``), and the later rows launch."""
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
            try:
                handle = job.launch(self.ctx, ready)
            except Exception as e:  # noqa: BLE001 - one row's launch must not stop every sweep's: that row fails
                self._refused(job, ready.id, e)
                continue
            self._launched(job, ready.id)
            if handle is None:  # cancelled meanwhile, or its MLflow run could not be made: next tick
                continue
            self.inflight[handle] = Work(job.kind, ready.id, ready.sweep_id, cpus, gpus, procs)
            free = (max(free[0] - cpus, 0.0), max(free[1] - gpus, 0.0))  # a GPU trial waiting as demand holds no GPU

    def _refused(self, job: TrialJob | ProbeJob | TuningJob, row_id: str, error: Exception) -> None:
        """A launch raised: the row goes back to waiting, as never launched; the failure is counted, logged once with its
        traceback and shown in /v1/health (Faults). Raised LAUNCH_TRIES times in a row over LAUNCH_GRACE_S at least, the
        row fails with the reason, as a trial that raised on its worker does (its sweep's failure budget counts it), unless
        the cluster is away (Cluster.healthy): then every launch raises, and the rows wait for it."""
        with self.ctx.store.session() as s:
            unlaunch(s, s.get(job.table, row_id))  # marked running before it raised: waiting again, as never launched
        fault = self.faults.record(f"launching {job.kind} {row_id}", error)
        tries, since = self.refused.get(row_id, (0, time.monotonic()))
        self.refused[row_id] = (tries + 1, since)
        if tries + 1 < LAUNCH_TRIES or time.monotonic() - since < LAUNCH_GRACE_S or not self.cluster.healthy():
            return  # a cluster that is away refuses every launch: not this row's failure, it waits for the cluster
        self._launched(job, row_id)
        reason = f"its launch failed {tries + 1} times in a row: {fault.message}"
        with self.ctx.store.session() as s:
            row = s.get(job.table, row_id)
            failed = fail_unlaunched(s, row, reason)
            run_id = getattr(row, "mlflow_run_id", None)
        run_id = run_id or self.ctx.take_run(row_id)  # a trial's run, made ahead or stored before its start raised
        if failed and run_id and self.ctx.tracking:
            self.ctx.defer(self.ctx.tracking.end_trial, run_id, TrialStatus.FAILED, reason)

    def _launched(self, job: TrialJob | ProbeJob | TuningJob, row_id: str) -> None:
        """The row's launch did not raise (or it failed for good): its run of refusals ends."""
        if self.refused.pop(row_id, None) is not None:
            self.faults.clear(f"launching {job.kind} {row_id}")

    def _demand(self, cpus: float, gpus: float, processes: int) -> bool:
        """With GROUPSCALE_AUTOSCALING, whether to start a trial of a shape that no alive node holds so that it waits as
        demand the autoscaler sees: yes while none of that shape is in flight (one asks; the node it brings takes the
        next ones through the free resources)."""
        if not self.ctx.settings.autoscaling or fits(self.cluster.nodes(), cpus, gpus, processes):
            return False
        return not any((w.cpus, w.gpus, w.processes) == (cpus, gpus, processes) for w in self.inflight.values())

    def _make_room(self, cpus: float, gpus: float, free: tuple[float, float]) -> None:
        """Evict idle warm workers until new work of this size fits beside them: ``free`` counts what idle
        workers hold, so without them there is ``free - idle``."""
        idle = self.ctx.backend.idle_resources()
        short = (cpus - (free[0] - idle.get("CPU", 0.0)), gpus - (free[1] - idle.get("GPU", 0.0)))
        if short[0] > 1e-9 or short[1] > 1e-9:
            self.ctx.backend.evict_idle(max(short[0], 0.0), max(short[1], 0.0))
