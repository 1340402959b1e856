"""The warm workers of the Ray backend as bookkeeping, without Ray: which worker runs which trial, which are idle and
since when, and which to stop to make room or after an idle timeout (service.scheduler.ray_backend makes the calls)."""

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
