"""The statuses of sweeps, trials, lr tunings and probes, the moves allowed between them, and cancel.

Every status write of the controller goes through ``transition`` (one row) or ``cancel_sweep`` (a
sweep and everything it owns); no other module assigns a status. A write is compare-and-set
(``UPDATE ... WHERE id = :id AND status = :from``), so when two writers race (a cancel and a trial's
completion) exactly one wins and the other sees ``False`` instead of overwriting it.

    Sweep    queued -> running -> fitting -> succeeded | failed
             queued | running | fitting -> cancelled
             fitting -> running               (a restart in the middle of a fit fits again)
             succeeded | failed -> running    (extend: new trials beside the finished ones, service.extend)

    Trial    pending -> running -> succeeded | failed | no_signal | cancelled
             pending -> cancelled
             pending -> failed                (its launch kept raising: service.scheduler.launching)
             running -> pending               (its worker is gone: resume from its checkpoint)

    LrTuning pending -> running -> succeeded | failed | cancelled
             pending -> cancelled | failed;  running -> pending (a restart: the search runs again)

    Probe    queued -> running -> succeeded | failed
             queued -> failed;  running -> queued (a restart)
"""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import update
from sqlalchemy.orm import Session

from sweeps.trial import TrialOutcome


class SweepStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FITTING = "fitting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TrialStatus(StrEnum):
    """A trial's status in the store: its own outcome once it ended (sweeps.trial.TrialOutcome), else the controller's."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = TrialOutcome.SUCCEEDED.value
    FAILED = TrialOutcome.FAILED.value
    NO_SIGNAL = TrialOutcome.NO_SIGNAL.value
    CANCELLED = "cancelled"


class TuningStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ProbeStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


Status = SweepStatus | TrialStatus | TuningStatus | ProbeStatus

_S, _T, _L, _P = SweepStatus, TrialStatus, TuningStatus, ProbeStatus
TRANSITIONS: dict[type[StrEnum], dict[StrEnum, frozenset[StrEnum]]] = {
    SweepStatus: {
        _S.QUEUED: frozenset({_S.RUNNING, _S.CANCELLED}),
        _S.RUNNING: frozenset({_S.FITTING, _S.CANCELLED, _S.FAILED}),  # failed: its failure budget is spent
        _S.FITTING: frozenset({_S.SUCCEEDED, _S.FAILED, _S.CANCELLED, _S.RUNNING}),
        _S.SUCCEEDED: frozenset({_S.RUNNING}),
        _S.FAILED: frozenset({_S.RUNNING}),
    },
    TrialStatus: {
        _T.PENDING: frozenset({_T.RUNNING, _T.CANCELLED, _T.FAILED}),  # failed: its launch kept raising
        _T.RUNNING: frozenset({_T.SUCCEEDED, _T.FAILED, _T.NO_SIGNAL, _T.CANCELLED, _T.PENDING}),
    },
    TuningStatus: {
        _L.PENDING: frozenset({_L.RUNNING, _L.CANCELLED, _L.FAILED}),
        _L.RUNNING: frozenset({_L.SUCCEEDED, _L.FAILED, _L.CANCELLED, _L.PENDING}),
    },
    ProbeStatus: {_P.QUEUED: frozenset({_P.RUNNING, _P.FAILED}), _P.RUNNING: frozenset({_P.SUCCEEDED, _P.FAILED, _P.QUEUED})},
}


def terminal(kind: type[StrEnum]) -> frozenset[StrEnum]:
    """The statuses of ``kind`` with no move out of them."""
    return frozenset(st for st in kind if st not in TRANSITIONS[kind])


SWEEP_TERMINAL = terminal(SweepStatus) | {SweepStatus.SUCCEEDED, SweepStatus.FAILED}  # final unless extended
TRIAL_TERMINAL = terminal(TrialStatus)
TUNING_TERMINAL = terminal(TuningStatus)
TRIAL_USABLE = frozenset({TrialStatus.SUCCEEDED, TrialStatus.NO_SIGNAL})  # ended with a measurement (or a reason none)


class IllegalTransition(ValueError):
    """A status move that the transition table does not allow."""


KIND_OF_TABLE: dict[str, type[StrEnum]] = {
    "sweeps": SweepStatus,
    "sweep_trials": TrialStatus,
    "lr_tunings": TuningStatus,
    "probes": ProbeStatus,
}  # service.store's table names


def _kind_of(row: object) -> type[StrEnum]:
    return KIND_OF_TABLE[row.__tablename__]  # type: ignore[attr-defined]


def is_running(row: object) -> bool:
    """Whether a sweep, trial, lr tuning or probe row is in its kind's RUNNING status."""
    return row.status == _kind_of(row).RUNNING  # type: ignore[attr-defined]


def check(kind: type[StrEnum], source: str, to: StrEnum) -> None:
    """Raises IllegalTransition unless ``source -> to`` is in the table for ``kind``."""
    allowed = TRANSITIONS[kind].get(kind(source), frozenset())
    if to not in allowed:
        valid = ", ".join(sorted(allowed)) or "none (a final status)"
        raise IllegalTransition(f"{kind.__name__} {source} -> {to} is not allowed; from {source}: {valid}")


def transition(s: Session, row: object, to: StrEnum, **values: object) -> bool:
    """Move ``row`` from the status it was read with to ``to`` (and set ``values``), compare-and-set.

    Returns False, changing nothing, when another writer moved the row first (its status in the
    database is no longer the one read); the row is then refreshed from the database.
    Raises:
        IllegalTransition: ``to`` is not allowed from the row's status.
    """
    kind, source = _kind_of(row), row.status  # type: ignore[attr-defined]
    check(kind, source, to)
    table = type(row)
    done = s.execute(
        update(table)
        .where(table.id == row.id, table.status == source)
        .values(status=to, **values)  # type: ignore[attr-defined]
        .execution_options(synchronize_session=False)
    ).rowcount
    if done:
        row.status = to  # type: ignore[attr-defined]
        for key, value in values.items():
            setattr(row, key, value)
        s.flush()  # nothing else of the row changed: write what it holds so the refresh below keeps it
        return True
    s.refresh(row)
    return False


def fail_sweep(s: Session, sweep: object, error: str) -> bool:
    """End a running sweep ``failed`` (its failure budget, max_failed_trials, is spent) and cancel what it owns
    that has not ended, as cancel_sweep does. Returns False if the sweep was no longer running."""
    if not transition(s, sweep, SweepStatus.FAILED, error=error):
        return False
    _cancel_owned(s, sweep, "cancelled: the sweep failed (max_failed_trials)")
    return True


def cancel_sweep(s: Session, sweep: object) -> bool:
    """Cancel a sweep and everything it owns that has not ended: its trials and lr tunings, pending or
    running, are ``cancelled`` now (the scheduler stops the running ones' workers, ends their MLflow
    runs, and then the parent run). A cancel is asked for, not an error: the sweep's ``error`` is cleared (a queued
    sweep's reason for waiting with it). Returns False if the sweep had already ended.
    """
    if sweep.status in SWEEP_TERMINAL or not transition(s, sweep, SweepStatus.CANCELLED, error=None):  # type: ignore[attr-defined]
        return False
    _cancel_owned(s, sweep)
    return True


def _waiting(kind: type[StrEnum]) -> StrEnum:
    """The status of a row of ``kind`` waiting to start: a probe's queued, a trial's or lr tuning's pending."""
    return ProbeStatus.QUEUED if kind is ProbeStatus else kind.PENDING  # type: ignore[attr-defined]


def unlaunch(s: Session, row: object) -> bool:
    """A trial, lr tuning or probe marked running whose launch raised goes back to waiting to start, as if never
    launched (a trial's attempt is taken back). Returns False when it is not running (a cancel came first, or the
    launch raised before marking it)."""
    if not is_running(row):
        return False
    kind = _kind_of(row)
    return transition(s, row, _waiting(kind), **({"attempts": row.attempts - 1} if kind is TrialStatus else {}))  # type: ignore[attr-defined]


def fail_unlaunched(s: Session, row: object, reason: str) -> bool:
    """A trial, lr tuning or probe whose launch kept raising ends ``failed`` with ``reason`` (a trial's ``reason``,
    the others' ``error``). Returns False, changing nothing, when it is no longer waiting to start (a cancel came
    first, or it was launched after all)."""
    kind = _kind_of(row)
    if row.status != _waiting(kind):  # type: ignore[attr-defined]
        return False
    return transition(s, row, kind.FAILED, **{"reason" if kind is TrialStatus else "error": reason})  # type: ignore[attr-defined]


def _cancel_owned(s: Session, sweep: object, reason: str | None = None) -> None:
    """Its trials and lr tunings that have not ended, pending or running, are ``cancelled`` (trials with ``reason``)."""
    for trial in sweep.trials:  # type: ignore[attr-defined]
        if trial.status not in TRIAL_TERMINAL:
            transition(s, trial, TrialStatus.CANCELLED, **({"reason": reason} if reason else {}))
    for tuning in sweep.lr_tunings:  # type: ignore[attr-defined]
        if tuning.status not in TUNING_TERMINAL:
            transition(s, tuning, TuningStatus.CANCELLED)
