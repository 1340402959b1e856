"""Extending a finished sweep: more group sizes or seeds as new trials, every finished trial kept and refitted.

A boundary fit asks for a wider grid ("extend the grid to G = 24"); rerunning the whole sweep would
redo every trial. ``extend_sweep`` adds only the (G, B, seed) the sweep does not have, with their lr
tunings when the sweep tunes lr, and moves the sweep from succeeded or failed back to running
(service.lifecycle); the scheduler runs the new trials and fits all of them when they end.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.lifecycle import SweepStatus, transition
from service.store import LrTuning, Store, Sweep, Trial
from sweeps.planner import plan_trials
from sweeps.spec import SweepSpec


class ExtendRefused(Exception):
    """The sweep cannot be extended now (HTTP 409) or the extension adds nothing (HTTP 422)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def extended_spec(spec: SweepSpec, group_sizes: list[int], seeds: list[int]) -> SweepSpec:
    """The spec with ``group_sizes`` and ``seeds`` added (sorted, no repeats).

    Raises:
        pydantic.ValidationError: the merged spec is invalid (a G that does not divide a budget, too many trials).
        ExtendRefused: an adaptive sweep (it grows by its own study), nothing asked, or nothing new.
    """
    if spec.mode != "grid":
        raise ExtendRefused(422, "an adaptive sweep chooses its own trials: submit a new sweep with a wider group_sizes")
    if not group_sizes and not seeds:
        raise ExtendRefused(422, "nothing asked: give group_sizes (group sizes to add) or seeds (seeds to add at every G)")
    merged = {
        **spec.model_dump(mode="json"),
        "group_sizes": sorted({*spec.group_sizes, *group_sizes}),
        "seeds": sorted({*spec.seeds, *seeds}),
    }
    new = SweepSpec.model_validate(merged)
    if new.group_sizes == spec.group_sizes and new.seeds == spec.seeds:
        raise ExtendRefused(422, "nothing to add: every group size and seed given is already in the sweep")
    return new


def extend_sweep(s: Session, store: Store, sweep: Sweep, new: SweepSpec) -> list[Trial]:
    """Add the trials (and lr tunings) of ``new`` that ``sweep`` lacks and reopen it. Returns the new trials.

    Raises:
        ExtendRefused: 409 while the sweep is queued, running or fitting, or after a cancel.
    """
    if sweep.status not in (SweepStatus.SUCCEEDED, SweepStatus.FAILED):
        raise ExtendRefused(409, f"sweep {sweep.id} is {sweep.status}: only a succeeded or failed sweep can be extended")
    have = {(t.group_size, t.samples_per_step, t.seed) for t in sweep.trials}
    start = max((t.position for t in sweep.trials), default=-1) + 1
    plans = [p for p in plan_trials(new) if (p.group_size, p.samples_per_step, p.seed) not in have]
    trials = [Trial.planned(sweep.id, start + i, p) for i, p in enumerate(plans)]
    if not transition(s, sweep, SweepStatus.RUNNING, fit=None, error=None, mlflow_closed=False):
        raise ExtendRefused(409, f"sweep {sweep.id} changed status while being extended; try again")
    sweep.trials.extend(trials)  # through the relationship, so the answer's progress counts them (not s.add_all)
    if new.tune_lr is not None:
        tuned = {(t.group_size, t.samples_per_step) for t in sweep.lr_tunings}
        sweep.lr_tunings.extend(
            LrTuning(sweep_id=sweep.id, group_size=g, samples_per_step=b)
            for b in new.samples_per_step
            for g in new.group_sizes
            if (g, b) not in tuned
        )
    store.set_spec(sweep, new)
    return trials
