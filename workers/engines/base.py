"""What every engine's trainer shares: the outcome of a trial, its rule for ``no_signal``, and the ``report`` callback
it sends metrics through (Ray and MLflow stay at the edge: workers.entry, workers.tracking)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

NO_SIGNAL_STEP_FRACTION = 0.5  # a trial with more steps (or generations) than this without any signal is no_signal

# report(metrics, step): a trial's metrics at an optimizer step; a report with a flush() is flushed at each checkpoint
Report = Callable[[dict[str, float], int], None]


class TrialOutcome(StrEnum):
    """How a trial ended, as its trainer says (the controller's TrialStatus takes it as is)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    NO_SIGNAL = "no_signal"  # most steps had equal rewards in every group: not a data point


@dataclass
class TrialResult:
    """status: a TrialOutcome (a plain string is read as one); metrics: the final metrics; reason: why, if not
    succeeded; steps_done: optimizer steps (or measurement repeats) completed.

    Raises:
        ValueError: a status that is not a TrialOutcome, naming the valid ones.
    """

    status: TrialOutcome
    metrics: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    steps_done: int = 0

    def __post_init__(self) -> None:
        try:
            self.status = TrialOutcome(self.status)
        except ValueError:
            raise ValueError(f"unknown trial outcome {self.status!r}; valid: {', '.join(TrialOutcome)}") from None
