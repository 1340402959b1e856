"""What every engine's trainer is given besides its config: where its process runs in the trial (Placement) and the
``report`` callback it sends metrics through (Ray and MLflow stay at the edge: workers.entry, workers.tracking). Torch-free:
the processes that start trials decide their placement here without importing the trainer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Placement:
    """Where this process runs in its trial, decided once where the process starts (workers.worker for rank 0,
    workers.ranks for the others; a trainer called directly runs alone) and passed down, as nanoGPT's train.py sets
    ``ddp_rank`` and ``master_process`` once.

    rank, world_size: this process among the trial's P processes; device: ``cpu`` or ``cuda`` (each rank sees its one
    GPU as device 0); is_main: rank 0, which evaluates, probes, logs and saves the trial's checkpoint.
    """

    rank: int = 0
    world_size: int = 1
    device: str = "cpu"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def alone(cls, device: str = "cpu") -> Placement:
        """A trial on one process."""
        return cls(0, 1, device)


ALONE = Placement()  # one process on the CPU: the default of what only asks for the rank

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

    def __getattr__(self, name: str) -> Any:  # log_params, set_tags, log_table, flush: the report's own, or nothing
        return getattr(self._report, name, lambda *args: None)  # a foreign object: whatever the caller passed as report


def run_report(report: Report) -> RunReport:
    """``report`` with every RunReport call, checked once where a trial starts: itself when it has them all."""
    return report if isinstance(report, RunReport) else _Partial(report)
