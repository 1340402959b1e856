"""What every engine's trainer shares: the outcome of a trial, its rule for ``no_signal``, and the ``report`` callback
it sends metrics through (Ray and MLflow stay at the edge: workers.entry, workers.tracking)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

NO_SIGNAL_STEP_FRACTION = 0.5  # a trial with more steps (or generations) than this without any signal is no_signal

# report(metrics, step): a trial's metrics at an optimizer step (a RunReport gets the rest of what a trial logs)
Report = Callable[[dict[str, float], int], None]


@runtime_checkable
class RunReport(Protocol):
    """What a trainer logs besides metrics, as an MLflow run takes it (workers.tracking.RunLogger): the settings it
    ran with, tags, a table of eval samples, and ``flush`` (the points so far made durable, before a checkpoint)."""

    def __call__(self, metrics: dict[str, float], step: int) -> None: ...
    def log_params(self, params: dict[str, str]) -> None: ...
    def set_tags(self, tags: dict[str, str]) -> None: ...
    def log_table(self, rows: list[dict]) -> None: ...
    def flush(self) -> None: ...


class _Partial:
    """A report with some of RunReport's calls or none (a test's recorder, a benchmark's lambda): those it has are
    called, the others do nothing. The one place a report's calls are looked up by name."""

    def __init__(self, report: Report) -> None:
        self._report = report

    def __call__(self, metrics: dict[str, float], step: int) -> None:
        self._report(metrics, step)

    def _call(self, name: str, *args: Any) -> None:
        method = getattr(self._report, name, None)  # a foreign object: whatever the caller passed as report
        if method is not None:
            method(*args)

    def log_params(self, params: dict[str, str]) -> None:
        self._call("log_params", params)

    def set_tags(self, tags: dict[str, str]) -> None:
        self._call("set_tags", tags)

    def log_table(self, rows: list[dict]) -> None:
        self._call("log_table", rows)

    def flush(self) -> None:
        self._call("flush")


def run_report(report: Report) -> RunReport:
    """``report`` with every RunReport call, checked once where a trial starts: itself when it has them all."""
    return report if isinstance(report, RunReport) else _Partial(report)
