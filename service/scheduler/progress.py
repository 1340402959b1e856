"""What running tasks (a probe, an answer) report as they go, kept for the API: the board (an actor of the Ray backend)
and the ``report`` callback each task gets, which sends to it."""

from __future__ import annotations

import time
from typing import Any

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
