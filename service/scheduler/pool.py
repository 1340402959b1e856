"""What the Ray backend keeps, without Ray (service.scheduler.ray_backend makes the calls): its warm workers (which runs
which trial, which are idle and since when, which to stop to make room or after an idle timeout) and what running tasks
(a probe, an answer) report as they go (the board, an actor of the backend, and the ``report`` each task sends with)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PooledWorker:
    """One TrialWorker actor: its handle, its shape (a process's CPUs and GPUs; processes > 1: rank 0 of a trial of
    several processes, in a placement group of its own, never reused) and what it does."""

    handle: Any
    cpus: float
    gpus: float
    processes: int = 1
    trial: str | None = None  # the trial it runs now; None: idle (warm, holding its resources)
    idle_since: float = field(default_factory=time.monotonic)
    started: Any = None  # ref of the worker's first answer: ready once its imports are done
    ping: Any = None  # ref of the last liveness question to a busy worker, unanswered yet
    asked: float = field(default_factory=time.monotonic)  # when ``ping`` (or, before the first answer, the start) was sent


class WarmPool:
    """Worker name -> PooledWorker, and the choices made on them."""

    def __init__(self) -> None:
        self.workers: dict[str, PooledWorker] = {}

    def running(self, trial: str) -> list[str]:
        """The workers that run ``trial`` (one, or none)."""
        return [name for name, w in self.workers.items() if w.trial == trial]

    def idle(self, cpus: float, gpus: float) -> PooledWorker | None:
        """An idle worker of this shape (a one-process trial of the shape starts on it, taking nothing new)."""
        return next((w for w in self.workers.values() if w.trial is None and (w.cpus, w.gpus) == (cpus, gpus)), None)

    def warm(self, cpus: float, gpus: float) -> int:
        """How many idle workers of this shape there are."""
        return sum(1 for w in self.workers.values() if w.trial is None and (w.cpus, w.gpus) == (cpus, gpus))

    def release(self, trial: str) -> list[str]:
        """The trial ended: its worker is idle (warm) for the next trial of its shape. Returns the workers to stop
        instead: the rank 0 of a trial of several processes (with its placement group, a trial's own)."""
        stop = []
        for name in self.running(trial):
            w = self.workers[name]
            if w.processes > 1:
                stop.append(name)
            else:
                w.trial, w.idle_since = None, time.monotonic()
        return stop

    def evictable(self, cpus: float, gpus: float) -> list[str]:
        """Idle workers, longest idle first, until those listed hold at least ``cpus`` and ``gpus`` (or none is left):
        room for work that cannot run on them."""
        out, freed = [], [0.0, 0.0]
        for name, w in sorted(self.workers.items(), key=lambda kv: kv[1].idle_since):
            if freed[0] >= cpus - 1e-9 and freed[1] >= gpus - 1e-9:
                break
            if w.trial is None:
                out.append(name)
                freed = [freed[0] + w.cpus, freed[1] + w.gpus]
        return out

    def stale(self, max_idle_s: float) -> list[str]:
        """The workers idle for longer than ``max_idle_s`` (0: every idle one)."""
        now = time.monotonic()
        return [name for name, w in self.workers.items() if w.trial is None and now - w.idle_since >= max_idle_s]

    def idle_resources(self) -> dict[str, float]:
        """CPUs and GPUs held by idle workers (free for a trial of their shape, and once they are evicted)."""
        idle = [w for w in self.workers.values() if w.trial is None]
        return {"CPU": sum(w.cpus for w in idle), "GPU": sum(w.gpus for w in idle)}


REPORT_EVERY_S = 0.5  # a task's reports within one stage reach the board at most this often (a stage change at once)


class ProgressBoard:
    """What each running task (a probe, an answer) reported last, with the first report of each stage it went through
    (``stages``), so that no stage is missed between two reads. One actor per controller (Ray's pattern for progress:
    tasks call an actor); wrapped by ray.remote at its first use."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, Any]] = {}

    def put(self, key: str, progress: dict[str, Any]) -> None:
        stages = self._jobs.get(key, {}).get("stages", [])
        if not stages or stages[-1]["stage"] != progress["stage"]:
            stages = [*stages, {"stage": progress["stage"], "label": progress["label"]}]
        self._jobs[key] = {**progress, "stages": stages}

    def read(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        return {k: self._jobs[k] for k in keys if k in self._jobs}

    def drop(self, key: str) -> None:
        self._jobs.pop(key, None)


class Reporter:
    """The ``report`` callback a task gets (workers.progress.Report): sends to the board without waiting for it,
    a report of the same stage at most every REPORT_EVERY_S. Pickled into the task with the board's handle."""

    def __init__(self, board: Any, key: str) -> None:
        self.board, self.key = board, key
        self._stage, self._sent = None, 0.0

    def __call__(self, progress: dict[str, Any]) -> None:
        now = time.monotonic()
        if progress["stage"] == self._stage and now - self._sent < REPORT_EVERY_S:
            return
        self._stage, self._sent = progress["stage"], now
        self.board.put.remote(self.key, progress)
