"""The controller's Ray backend: the only module of the controller that imports ray.

The scheduler's loop talks to a ``Backend`` (service.scheduler.context): run a trial on a warm worker
(a detached, named TrialWorker actor reused by the trials of its shape, so torch and the trainer are
imported once) or a probe / lr tuning as a task, wait for any of them, read a result, stop one, say
what is free. This module is that interface on a real Ray cluster; the loop's unit tests use a fake.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from service.scheduler.pool import PooledWorker, ProgressBoard, Reporter, WarmPool
from service.settings import Settings
from service.store import outside_transaction
from sweeps import storage
from workers.entry import TrialWorker

NAMESPACE = "groupscale"  # named detached actors are found again by a restarted controller in it
WORKER_PREFIX = "worker-"
TRIAL_SLOTS = 4  # threads of a worker's default concurrency group: its trial's run() and the attaches of restarts
CONTROL = "control"  # a worker's concurrency group of its own for current(): liveness never waits for those slots
UNPLACED_S = 5.0  # a busy worker that has not answered a liveness question for this long is not placed (no node yet)
PING_EVERY_S = 2.0  # a busy worker that answered is asked again after this long (not at every tick)
STARTING_S = 60.0  # likewise a new worker that has not finished its imports
WORKER_ANSWER_S = 120.0  # a worker that neither answers nor is known dead by then is killed (a restart takes seconds)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
log = logging.getLogger("groupscale.scheduler")
_TRIAL_WORKER = ray.remote(concurrency_groups={CONTROL: 1})(TrialWorker)  # groups are set here, not in .options()


RAY_LOG_LEVEL = logging.ERROR  # no "Started a local Ray instance", connection or token-auth lines in `up`'s terminal


def connect_ray(settings: Settings) -> Path | None:
    """Join the cluster at RAY_ADDRESS, or start a local head on loopback. Returns the local head's session folder
    (under Ray's temp dir: its logs, sockets and runtime resources), None on a cluster.

    The local head rotates its logs, its workers' stdout and stderr included, at ``settings.ray_rotation_max_bytes``
    keeping ``ray_rotation_backup_count`` files: Ray reads both from RAY_ROTATION_MAX_BYTES and
    RAY_ROTATION_BACKUP_COUNT in the environment its processes start with (on a cluster, each node's own).
    Call it from the main thread before the web server installs its signal handlers: ray.init
    replaces the process's SIGTERM handler, and the server's must win so that SIGTERM shuts the
    stack down cleanly.
    """
    if settings.ray_address:
        ray.init(address=settings.ray_address, namespace=NAMESPACE, log_to_driver=False, logging_level=RAY_LOG_LEVEL)
        return None
    os.environ["RAY_ROTATION_MAX_BYTES"] = str(settings.ray_rotation_max_bytes)
    os.environ["RAY_ROTATION_BACKUP_COUNT"] = str(settings.ray_rotation_backup_count)
    # address="local": always a new head, never a cluster that `ray start` left on this machine.
    context = ray.init(
        address="local",
        num_cpus=settings.ray_num_cpus,
        namespace=NAMESPACE,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=RAY_LOG_LEVEL,
        _node_ip_address="127.0.0.1",
    )
    return Path(context.address_info["session_dir"])


def disconnect_ray() -> None:
    if ray.is_initialized():
        ray.shutdown()


def remove_session(session_dir: Path) -> None:
    """Delete the session folder of a local head that has stopped, and Ray's ``session_latest`` link when it points
    there. Other heads' sessions in the same temp dir (other users', other `up`s') are left alone."""
    shutil.rmtree(session_dir, ignore_errors=True)
    latest = session_dir.parent / "session_latest"
    with contextlib.suppress(OSError):
        if Path(os.readlink(latest)) == session_dir:
            latest.unlink()  # a head started since then has pointed it at its own session: then it is not ours


class RayBackend:
    """Backend on Ray. Handles are Ray ObjectRefs of a trial's ``TrialWorker.run`` or of a task's result."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.state_dir = settings.worker_state_dir  # what each worker runs (workers.worker.TrialWorker), in storage
        self.warm = WarmPool()
        self._connected = False  # this object called ray.init (so it calls ray.shutdown)
        self._session: Path | None = None  # the session folder of the local head it started (removed with it)
        self._board: Any = None  # the ProgressBoard actor, made for the first task that reports
        self._reports: dict[Any, str] = {}  # a reporting task's ref -> its key on the board

    # -- the connection ----------------------------------------------------------------------
    @outside_transaction
    def connect(self) -> None:
        if not ray.is_initialized():  # `groupscale up` connects before the web server starts
            self._session = connect_ray(self.settings)
            self._connected = True
        if not self.settings.ray_address:  # a fresh local head: no worker of an earlier run can be alive
            storage.delete(self.state_dir)

    def disconnect(self) -> None:
        """Leave the cluster. On a cluster of its own (RAY_ADDRESS) the idle warm workers are stopped first: detached,
        they would hold their CPUs and GPUs on a shared cluster after the controller is gone (running trials go on)."""
        if self.settings.ray_address and ray.is_initialized():
            try:
                self.reap_idle(0)
            except Exception:  # noqa: BLE001 - a stop goes on; the next controller's idle timeout reaps them
                log.warning("stopping the idle workers failed", exc_info=True)
        if self._connected:
            disconnect_ray()
            if self._session is not None:
                remove_session(self._session)

    def connected(self) -> bool:
        return ray.is_initialized()

    @outside_transaction
    def available_resources(self) -> dict[str, float]:
        """What the cluster has free now, other users' work on a shared cluster included."""
        return dict(ray.available_resources()) if ray.is_initialized() else {}

    @outside_transaction
    def nodes(self) -> list[dict[str, float]]:
        """Each alive node's total resources ({"CPU": .., "GPU": .., ...}): the shapes a trial can be placed on."""
        return [dict(n["Resources"]) for n in ray.nodes() if n["Alive"]] if ray.is_initialized() else []

    @outside_transaction
    def unplaced(self) -> dict[str, float]:
        """Trial name -> seconds its worker has not answered: waiting for a node to be placed on (a new worker that
        no node can hold yet, one Ray restarts after its node died) or restarting. Such a worker holds no resources.

        A busy worker is asked ``current()`` (in its own concurrency group, answered while a trial trains); an answer
        ready within UNPLACED_S of the question means it is placed, and the next question is sent. A new worker's first
        answer comes after its imports (torch, transformers: seconds), so it has STARTING_S."""
        now, late = time.monotonic(), {}
        for w in self.warm.workers.values():
            if w.trial is None:
                continue
            ref = w.started if w.ping is None else w.ping
            if ref is not None:
                ready, _ = ray.wait([ref], timeout=0)
                if not ready:
                    if now - w.asked >= (STARTING_S if ref is w.started else UNPLACED_S):
                        late[w.trial] = now - w.asked
                    continue
            if w.started is not None and ref is w.started:
                w.started = None  # placed once: from now on, asked
            elif ref is not None and now - w.asked < PING_EVERY_S:
                continue  # answered a moment ago: asked again later
            w.ping, w.asked = _current(w.handle), now
        return late

    # -- trials, on a pool of warm workers ------------------------------------------------------
    @outside_transaction
    def start_trial(self, name: str, args: tuple, cpus: float, gpus: float, processes: int = 1) -> Any:
        """Run trial ``name`` on a warm worker of the same shape (an idle one, else a new one) and return
        the ref of its result. A worker already running ``name`` (launched just before a controller
        crash) is attached to instead of starting it twice. A trial of several ``processes`` (each of ``cpus`` CPUs and
        ``gpus`` GPUs) gets a new worker in a placement group of its own (workers.ranks)."""
        running = self.warm.running(name)
        worker = self.warm.workers[running[0]] if running else self.warm.idle(cpus, gpus) if processes == 1 else None
        if worker is None:
            worker = self._new_worker(cpus, gpus, processes)
        worker.trial = name
        return worker.handle.run.remote(name, *args)

    def _new_worker(self, cpus: float, gpus: float, processes: int = 1) -> PooledWorker:
        """A detached, named TrialWorker actor (it outlives the controller). A dead worker process is
        restarted by Ray at most trial_retries times and resumes its trial from the last checkpoint;
        the pending run() is retried on the restarted actor (max_task_retries=-1, bounded by the restarts).

        With several processes the worker is rank 0 in bundle 0 of a detached placement group named after it, of
        ``processes`` bundles of its shape (PACK: on one node when one holds them, else spread); the trial's other ranks
        take the other bundles (workers.ranks). The group is removed with the worker (_kill_worker)."""
        name = f"{WORKER_PREFIX}{uuid.uuid4().hex[:12]}"
        placed: dict[str, Any] = {}
        if processes > 1:
            bundle = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
            pg = placement_group([bundle] * processes, strategy="PACK", name=name, lifetime="detached")
            placed["scheduling_strategy"] = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
        handle = _TRIAL_WORKER.options(
            name=name,
            lifetime="detached",
            num_cpus=cpus,
            num_gpus=gpus,
            max_restarts=self.settings.trial_retries,
            max_task_retries=-1,
            max_concurrency=TRIAL_SLOTS,
            **placed,
        ).remote(self.state_dir, name)
        self.warm.workers[name] = PooledWorker(handle, cpus, gpus, processes, started=_current(handle))
        return self.warm.workers[name]

    @outside_transaction
    def prewarm(self, n: int, cpus: float, gpus: float) -> None:
        """Start idle workers of this shape until ``n`` are warm (torch and the trainer imported before
        the first trial asks for one)."""
        for _ in range(n - self.warm.warm(cpus, gpus)):
            self._new_worker(cpus, gpus)

    def release_trial(self, name: str) -> None:
        """The trial ended and was collected: its worker is idle (warm) for the next trial of its shape; the rank 0 of a
        trial of several processes is stopped instead, with its placement group (a trial's own)."""
        self._kill_workers(self.warm.release(name))

    @outside_transaction
    def kill_trial(self, name: str) -> None:
        """Stop a running trial: its worker process is killed (and not restarted)."""
        self._kill_workers(self.warm.running(name))

    def has_idle(self, cpus: float, gpus: float) -> bool:
        """Whether a warm worker of this shape is idle (a trial of the shape starts on it, taking nothing new)."""
        return self.warm.idle(cpus, gpus) is not None

    @outside_transaction
    def evict_idle(self, cpus: float, gpus: float) -> None:
        """Kill idle workers, longest idle first, until those killed held at least ``cpus`` and ``gpus``
        (or none is left): room for work that cannot run on them."""
        self._kill_workers(self.warm.evictable(cpus, gpus))

    @outside_transaction
    def reap_idle(self, max_idle_s: float) -> None:
        """Kill the workers idle for longer than ``max_idle_s`` (0: every idle one)."""
        self._kill_workers(self.warm.stale(max_idle_s))

    def idle_resources(self) -> dict[str, float]:
        """CPUs and GPUs held by idle workers (free for a trial of their shape, and once they are evicted)."""
        return self.warm.idle_resources()

    @outside_transaction
    def pool(self) -> dict[str, int]:
        """How many workers run a trial, are idle and warm, or are idle and still starting (importing).
        Called from the API's threads: it reads a snapshot of the pool."""
        workers = list(self.warm.workers.values())
        idle = [w for w in workers if w.trial is None]
        refs = [w.started for w in idle if w.started is not None]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        starting = len(refs) - len(ready)
        return {"busy": len(workers) - len(idle), "idle": len(idle) - starting, "starting": starting}

    def _kill_workers(self, names: list[str]) -> None:
        for name in names:
            self._kill_worker(name)

    def _kill_worker(self, worker_name: str) -> None:
        w = self.warm.workers.pop(worker_name)
        with contextlib.suppress(ValueError):  # already gone
            ray.kill(w.handle, no_restart=True)
        if w.processes != 1:  # its placement group (a worker found again after a restart: processes unknown, 0)
            with contextlib.suppress(ValueError):  # it had none, or it is gone
                remove_placement_group(ray.util.get_placement_group(worker_name))
        storage.delete(storage.join(self.state_dir, f"{worker_name}.json"))

    @outside_transaction
    def trial_names(self) -> set[str]:
        """Names of the trials that the workers alive in this namespace run (or ran last), read from them."""
        self._discover()
        return {w.trial for w in self.warm.workers.values() if w.trial is not None}

    def _discover(self) -> None:
        """Find the workers a previous controller started (a cluster of its own keeps them) and ask each which
        trial it runs. Waits until every one has answered or is known dead (Ray said so): one restarting
        resumes its trial, so its trial is not lost. One that does neither within WORKER_ANSWER_S is killed
        (and waited for), so that its trial, started again elsewhere, never runs twice."""
        asks: dict[Any, tuple[str, Any]] = {}
        for name in ray.util.list_named_actors():
            if not name.startswith(WORKER_PREFIX) or name in self.warm.workers:
                continue
            try:
                handle = ray.get_actor(name)
            except ValueError:  # gone since it was listed
                continue
            asks[_current(handle)] = (name, handle)
        deadline = time.monotonic() + WORKER_ANSWER_S
        pending = list(asks)
        while pending:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
            for ref in ready:
                name, handle = asks.pop(ref)
                try:
                    trial, _ = ray.get(ref)
                except ray.exceptions.ActorUnavailableError:  # restarting: ask again
                    ref = _current(handle)
                    asks[ref] = (name, handle)
                    pending.append(ref)
                    continue
                except ray.exceptions.RayActorError:  # dead for good: its trial goes back to pending
                    continue
                self.warm.workers[name] = PooledWorker(
                    handle, 0.0, 0.0, 0, trial
                )  # shape unknown: never reused; stopped once idle
            if pending and time.monotonic() > deadline:
                for ref in pending:
                    name, handle = asks[ref]
                    log.warning("worker %s did not answer within %g s: killed, its trial runs again", name, WORKER_ANSWER_S)
                    ray.kill(handle, no_restart=True)
                ray.wait(pending, num_returns=len(pending), timeout=30)  # each ends with ActorDiedError once killed
                return

    @outside_transaction
    def attach_trial(self, name: str) -> Any | None:
        """The result ref of trial ``name`` on the live worker that runs it, or None when none does
        (workers are found by trial_names, which reconcile calls first)."""
        worker = next((w for w in self.warm.workers.values() if w.trial == name), None)
        return None if worker is None else worker.handle.run.remote(name)

    @outside_transaction
    def start_task(self, fn: Any, args: tuple, cpus: float, gpus: float, retries: int, report: bool = False) -> Any:
        """A Ray task (a probe, an lr tuning): retried ``retries`` times if its worker dies, never on an
        exception of its own. ``report``: ``fn`` takes a ``report`` callback (workers.progress), whose reports
        ``progress`` reads."""
        task = ray.remote(fn).options(num_cpus=cpus, num_gpus=gpus, max_retries=retries, retry_exceptions=False)
        if not report:
            return task.remote(*args)
        if self._board is None:
            self._board = ray.remote(num_cpus=0)(ProgressBoard).remote()
        key = uuid.uuid4().hex
        ref = task.remote(*args, report=Reporter(self._board, key))
        self._reports[ref] = key
        return ref

    @outside_transaction
    def progress(self, handles: list[Any]) -> dict[Any, dict[str, Any]]:
        """What each reporting task among ``handles`` reported last ({stage, label, done, total, stages}); {} when the
        board does not answer within 5 s (progress is shown, never waited for)."""
        keys = {self._reports[h]: h for h in handles if h in self._reports}
        if not keys:
            return {}
        try:
            latest = ray.get(self._board.read.remote(list(keys)), timeout=5)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError):
            log.warning("the progress board did not answer; progress is not updated this time")
            return {}
        return {keys[k]: v for k, v in latest.items()}

    @outside_transaction
    def wait(self, handles: list[Any], timeout_s: float) -> list[Any]:
        """The handles whose work has ended, after at most timeout_s."""
        ready, _ = ray.wait(handles, num_returns=1, timeout=timeout_s)  # back as soon as one has ended
        if ready:  # and every other that has ended by now
            ready, _ = ray.wait(handles, num_returns=len(handles), timeout=0)
        return ready

    @outside_transaction
    def result(self, handle: Any) -> Any:
        """The work's return value (read it after the work's last ``progress``). Raises: the work's own exception, or
        Ray's when its worker died."""
        key = self._reports.pop(handle, None)
        if key is not None:
            self._board.drop.remote(key)
        return ray.get(handle)

    @outside_transaction
    def cancel(self, handle: Any) -> None:
        ray.cancel(handle, force=True)

    @staticmethod
    def describe(e: BaseException) -> tuple[str, bool]:
        """(One line for users: the worker's own exception, not Ray's wrapper; True if the worker died). A worker
        Ray's memory monitor killed (OutOfMemoryError) died too: it is replaced, not given the next trial (a worker
        kept after an out-of-memory kill failed 13 of the next 16 trials with the stale message)."""
        died = isinstance(e, ray.exceptions.RayActorError | ray.exceptions.WorkerCrashedError | ray.exceptions.OutOfMemoryError)
        cause = getattr(e, "cause", None) or e
        first = (_ANSI.sub("", str(cause)).strip().splitlines() or [""])[0]
        return f"{type(cause).__name__}: {first}"[:1000], died


def _current(handle: Any) -> Any:
    """The ref of ``handle.current()`` in the worker's CONTROL group: answered while its trial slots are busy."""
    return handle.current.options(concurrency_group=CONTROL).remote()
