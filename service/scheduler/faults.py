"""Repeated failures of the scheduling loop: logged once with their traceback, counted, and shown in /v1/health."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

log = logging.getLogger("groupscale.scheduler")
REPORT_AFTER = 3  # a failure seen this many times in a row is a problem /v1/health reports


@dataclass
class Fault:
    message: str
    count: int
    since: float  # time.time() of the first of the run


class Faults:
    """What keeps failing, by place (``"tick"``, ``"admit <sweep id>"``). A failure whose message is new is logged
    with its traceback; a repeat is one line every REPORT_AFTER-th time (a stuck tick used to log a traceback a
    tick, about 110 a minute). Thread-safe: the scheduler records, /v1/health reads."""

    def __init__(self) -> None:
        self._faults: dict[str, Fault] = {}
        self._lock = threading.Lock()

    def record(self, where: str, error: BaseException) -> Fault:
        """Count ``error`` at ``where`` (call from an ``except`` block: the traceback is logged the first time)."""
        message = f"{type(error).__name__}: {error}"[:500]
        with self._lock:
            fault = self._faults.get(where)
            if fault is None or fault.message != message:
                fault = self._faults[where] = Fault(message, 0, time.time())
            fault.count += 1
        if fault.count == 1:
            log.exception("%s failed", where)
        elif fault.count % REPORT_AFTER == 0:
            log.error("%s still failing (%d times in a row since %s): %s", where, fault.count, _clock(fault.since), message)
        return fault

    def clear(self, where: str) -> None:
        """``where`` succeeded: its run of failures ends."""
        with self._lock:
            self._faults.pop(where, None)

    def problems(self) -> list[str]:
        """One line per place that failed REPORT_AFTER or more times in a row, for /v1/health."""
        with self._lock:
            faults = sorted(self._faults.items())
        return [
            f"{where}: failed {f.count} times in a row since {_clock(f.since)}: {f.message}"
            for where, f in faults
            if f.count >= REPORT_AFTER
        ]


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))
