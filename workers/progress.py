"""What a probe or an answer says while it runs: its stage (the data, the model it builds, the probe, the pilot, the
halving), in words and as done of total.

The work takes a ``report`` callback (None: nobody listens), as the trainer does: on Ray the controller's backend
passes one that forwards to the controller (service.scheduler.ray_backend), so ``GET /v1/answers/{id}`` shows it in
``progress``; ``--local`` passes one that draws it in the terminal (service.cli.render).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Report = Callable[[dict[str, Any]], None]  # called with say's dict: stage, label, done, total, unit, detail
STAGES = ("data", "model", "probe", "pilot", "halving")  # in the order an answer runs them (a probe: the first three)


def say(
    report: Report | None,
    stage: str,
    label: str,
    done: int | None = None,
    total: int | None = None,
    unit: str = "",
    detail: str = "",
) -> None:
    """One report, when someone listens: ``stage`` (one of STAGES); ``label``, what the stage does in words, the same
    for all its reports; ``done`` of ``total`` ``unit`` (None: not counted, or no known end); ``detail``, where it
    stands now."""
    assert stage in STAGES, stage
    if report is not None:
        report({"stage": stage, "label": label, "done": done, "total": total, "unit": unit, "detail": detail})
