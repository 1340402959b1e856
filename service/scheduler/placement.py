"""Trials and nodes: whether a trial's shape fits a node, which in-flight trials wait for one, and what they say.

A one-process trial runs on one node (its worker actor asks for ``cpus_per_trial`` CPUs and ``gpus_per_trial`` GPUs,
which Ray places on a single node); a trial of P processes is a placement group of P such bundles, on one node when one
holds them all, else spread. Its worker can wait for a node: when it is new and no node has the room yet, when Ray
restarts it after its node died, or, with an autoscaler, until a node of its shape is added. Such a worker holds no
resources, so the loop does not count it, stops idle warm workers at once (their room lets Ray place it, instead of
after GROUPSCALE_WORKER_IDLE_S) and writes in the trial's ``reason`` what it waits for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from service.lifecycle import TrialStatus
from service.store import Trial

WAITING = "waiting for a node with "  # the start of the reason of a trial whose worker waits (cleared once placed)
UNHEALTHY_S = 60.0  # a shape waited for this long, without an autoscaler to add it, makes /v1/health say so


def shape(cpus: float, gpus: float, processes: int = 1) -> str:
    """'2 CPUs and 1 GPU', '1 CPU', '2 processes of 1 CPU and 1 GPU': a trial's shape (``cpus`` and ``gpus`` in all) as
    the reason and the errors say it."""
    cpus, gpus = cpus / processes, gpus / processes
    parts = [f"{cpus:g} CPU{'' if cpus == 1 else 's'}"] + ([f"{gpus:g} GPU{'' if gpus == 1 else 's'}"] if gpus else [])
    return ("" if processes == 1 else f"{processes} processes of ") + " and ".join(parts)


def bundles_on(node: dict[str, float], cpus: float, gpus: float) -> int:
    """How many processes of ``cpus`` CPUs and ``gpus`` GPUs a node's total resources ({"CPU": .., "GPU": ..}) hold."""
    fit = [node.get(kind, 0.0) / need for kind, need in (("CPU", cpus), ("GPU", gpus)) if need > 0]
    return int(min(fit) + 1e-9) if fit else 10**9


def fits(nodes: list[dict[str, float]], cpus: float, gpus: float, processes: int = 1) -> bool:
    """Whether the alive nodes hold a trial of ``cpus`` CPUs and ``gpus`` GPUs in all, as ``processes`` equal bundles
    (one process: some node holds it; several: their bundles fit the nodes together, as a PACK placement group)."""
    return sum(bundles_on(n, cpus / processes, gpus / processes) for n in nodes) >= processes


def duration(seconds: float) -> str:
    """'45s', '3m', '2h05m': how long a trial has waited, at the precision a reason needs."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    return f"{s // 60}m" if s < 3600 else f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class Waiting:
    """The in-flight trials whose workers wait for a node, as the last tick found them."""

    seconds: dict[str, float] = field(default_factory=dict)  # trial id -> seconds waited
    shapes: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # trial id -> (cpus, gpus, processes)
    _written: dict[str, str] = field(default_factory=dict)  # trial id -> the reason stored last
    _since: dict[str, float] = field(default_factory=dict)  # trial id -> when it was first seen with no node of its shape

    def no_node(self, works: list, late: dict[str, float]) -> dict[str, float]:  # noqa: ANN001 - context.Work
        """Trial id -> seconds waited, for the in-flight trials whose shape no alive node holds (they wait by
        definition, from their launch: said at once, not after the backend's STARTING_S); those ``late`` already
        has keep its figure."""
        now = time.monotonic()
        self._since = {w.id: self._since.get(w.id, now) for w in works}
        return {t: now - since for t, since in self._since.items() if t not in late}

    def reasons(self) -> dict[str, str | None]:
        """Trial id -> the reason to store now (None: clear it, the trial's worker was placed), for the trials whose
        reason changed since the last call."""
        now = {t: WAITING + f"{shape(*self.shapes[t])} for {duration(s)}" for t, s in self.seconds.items()}
        changed: dict[str, str | None] = {t: r for t, r in now.items() if self._written.get(t) != r}
        changed |= {t: None for t in self._written if t not in now}
        self._written = now
        return changed

    def missing(self, nodes: list[dict[str, float]]) -> list[str]:
        """The shapes no alive node holds that trials have waited for longer than UNHEALTHY_S, e.g.
        ['1 CPU and 1 GPU (2 trials, 3m)'] (a shape some node holds only waits for room)."""
        long = [(self.shapes[t], s) for t, s in self.seconds.items() if s >= UNHEALTHY_S and not fits(nodes, *self.shapes[t])]
        by_shape: dict[tuple[float, float, int], list[float]] = {}
        for sh, s in long:
            by_shape.setdefault(sh, []).append(s)
        return [
            f"{shape(*sh)} ({len(w)} trial{'' if len(w) == 1 else 's'}, {duration(max(w))})" for sh, w in sorted(by_shape.items())
        ]


def store_reasons(session, changed: dict[str, str | None]) -> None:  # noqa: ANN001 - a store session
    """Write the changed reasons: a running trial's wait, or no wait (cleared, on a trial that ended or was cancelled
    meanwhile too; a reason of its own, such as a failure's, is kept)."""
    for trial_id, reason in changed.items():
        trial = session.get(Trial, trial_id)
        if trial is None:
            continue
        if reason is None and (trial.reason or "").startswith(WAITING):
            trial.reason = None
        elif reason is not None and trial.status == TrialStatus.RUNNING:
            trial.reason = reason
