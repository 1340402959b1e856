"""What the loop and every job kind share: the Backend protocol, work in flight and how it ended, and the Context.

The Context holds the store, the settings, MLflow (calls made through ``safe`` never raise into the scheduler) and
the backend, and sends MLflow calls that need not hold up scheduling to one background thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from service.settings import Settings
from service.store import Store
from service.tracking import Tracking

log = logging.getLogger("groupscale.scheduler")


class Backend(Protocol):
    """What the scheduler needs from a cluster (service.scheduler.ray_backend.RayBackend on Ray)."""

    def connect(self) -> None: ...
    def disconnect(self) -> None: ...
    def connected(self) -> bool: ...
    def available_resources(self) -> dict[str, float]: ...
    def nodes(self) -> list[dict[str, float]]: ...
    def unplaced(self) -> dict[str, float]: ...
    def start_trial(self, name: str, args: tuple, cpus: float, gpus: float, processes: int = 1) -> Any: ...
    def attach_trial(self, name: str) -> Any | None: ...
    def release_trial(self, name: str) -> None: ...
    def prewarm(self, n: int, cpus: float, gpus: float) -> None: ...
    def has_idle(self, cpus: float, gpus: float) -> bool: ...
    def evict_idle(self, cpus: float, gpus: float) -> None: ...
    def reap_idle(self, max_idle_s: float) -> None: ...
    def idle_resources(self) -> dict[str, float]: ...
    def pool(self) -> dict[str, int]: ...
    def trial_names(self) -> set[str]: ...
    def start_task(self, fn: Any, args: tuple, cpus: float, gpus: float, retries: int, report: bool = False) -> Any: ...
    def progress(self, handles: list[Any]) -> dict[Any, dict[str, Any]]: ...
    def wait(self, handles: list[Any], timeout_s: float) -> list[Any]: ...
    def result(self, handle: Any) -> Any: ...
    def kill_trial(self, name: str) -> None: ...
    def cancel(self, handle: Any) -> None: ...
    def describe(self, e: BaseException) -> tuple[str, bool]: ...


@dataclass(frozen=True)
class Work:
    """Work in flight: its kind ("trial", "probe", "tune"), row id, owning sweep and the resources it holds (in all,
    over its ``processes``)."""

    kind: str
    id: str
    sweep_id: str | None
    cpus: float
    gpus: float
    processes: int = 1


@dataclass(frozen=True)
class Outcome:
    """How work ended: its return value, or a one-line error (and whether the worker died rather than raised)."""

    value: Any = None
    error: str | None = None
    died: bool = False


class CallThread:
    """Makes calls one after another, in order, on one daemon thread (a call stuck retrying never holds
    up the process's exit, as a ThreadPoolExecutor's thread would)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[tuple[Callable, tuple]] = queue.SimpleQueue()
        self._done = threading.Condition()
        self._pending = 0
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable, *args: Any) -> None:
        with self._done:
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._calls.put((fn, args))

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until every submitted call has returned; False if ``timeout_s`` passed first."""
        with self._done:
            return self._done.wait_for(lambda: self._pending == 0, timeout_s)

    def _run(self) -> None:
        while True:
            fn, args = self._calls.get()
            try:
                fn(*args)
            finally:
                with self._done:
                    self._pending -= 1
                    self._done.notify_all()


@dataclass
class Context:
    store: Store
    settings: Settings
    tracking: Tracking | None
    backend: Backend
    deferred: list[tuple[Callable, tuple]] = field(default_factory=list)
    _mlflow: CallThread = field(default_factory=lambda: CallThread("groupscale-mlflow"))
    _prepared: dict[str, tuple[threading.Event, list]] = field(default_factory=dict)  # trial id -> (made, [run id])

    def safe(self, fn: Callable, *args: Any) -> Any:
        """Call an MLflow method; its failure is logged, never raised (MLflow trouble must not stop scheduling)."""
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - logged; the controller's state is in SQL, not MLflow
            log.exception("MLflow call %s failed", getattr(fn, "__name__", fn))
            return None

    def defer(self, fn: Callable, *args: Any) -> None:
        """Call ``safe(fn, *args)`` once run_deferred sends the tick's deferred calls (after the next work
        was launched), on the MLflow thread."""
        self.deferred.append((fn, args))

    def run_deferred(self) -> None:
        """Send the deferred MLflow calls to one background thread, which makes them in order while the
        scheduler goes back to waiting for work; drain() waits for them."""
        for fn, args in self.deferred:
            self._mlflow.submit(self.safe, fn, *args)
        self.deferred = []

    def drain(self, timeout_s: float | None = None) -> bool:
        """Wait until every deferred MLflow call was made (before a parent run ends: its children first).
        Returns False if ``timeout_s`` passed first (MLflow down: its calls retry for minutes)."""
        self.run_deferred()
        return self._mlflow.wait(timeout_s)

    def prepare_run(self, trial_id: str, create: Callable[..., str], *args: Any) -> None:
        """Create a trial's MLflow run ahead of its launch (``create(*args)`` on the MLflow thread), so that
        a freed worker does not wait for it; take_run hands it over."""
        if trial_id in self._prepared:
            return
        made: tuple[threading.Event, list] = (threading.Event(), [])

        def make() -> None:
            try:
                made[1].append(self.safe(create, *args))
            finally:
                made[0].set()

        self._prepared[trial_id] = made
        self._mlflow.submit(make)

    def take_run(self, trial_id: str, wait: bool = True) -> str | None:
        """The run prepared for this trial, waiting until it is made (``wait``); None if none was prepared
        (or could be made, or, without ``wait``, is made yet)."""
        made = self._prepared.get(trial_id)
        if made is None or not (wait or made[0].is_set()):
            return None
        del self._prepared[trial_id]
        made[0].wait()
        return made[1][0] if made[1] else None

    def prepared(self) -> list[str]:
        """The trials with a run prepared and not yet taken."""
        return list(self._prepared)

    def checkpoint_dir(self, trial_id: str) -> str:
        """The trial's checkpoint folder (GROUPSCALE_STORAGE_URI/checkpoints/<id>, a sweeps.storage location)."""
        return self.settings.checkpoint_dir(trial_id)
