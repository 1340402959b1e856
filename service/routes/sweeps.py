"""/v1/sweeps: submit, list, inspect, cancel, extend, delete (purge), trials, fit."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service import lifecycle
from service.deps import Authorized, ReadAuthorized, SchedulerDep, SettingsDep, StoreDep, TrackingDep, preflight_or_422
from service.extend import ExtendRefused, extend_sweep, extended_spec
from service.identity import model_key, task_key
from service.lifecycle import ProbeStatus, SweepStatus
from service.purge import PurgeRefused, clean_up, purge_sweep
from service.results import fit_from_trials, latest_job, sweep_public, unreadable_public
from service.schemas import SweepPublic, TrialPublic
from service.server_paths import with_server_paths
from service.store import Probe, ProbeKind, Sweep, Trial
from sweeps.fit import LawFit
from sweeps.report import answer_agreement
from sweeps.spec import SweepSpec, unknown_field_message

log = logging.getLogger("groupscale.api")

router = APIRouter(prefix="/v1/sweeps", tags=["sweeps"], dependencies=[ReadAuthorized])  # writes: Authorized too


def _public(sweep: Sweep, store: StoreDep, tracking: TrackingDep) -> SweepPublic:
    uri = tracking.public_uri if tracking else None
    url = tracking.run_url(sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id) if tracking else None
    return sweep_public(sweep, store.spec(sweep), uri, url)


def _get(store: StoreDep, s, sweep_id: str, lock: bool = False) -> Sweep:
    sweep = store.get_sweep(s, sweep_id, lock)
    if sweep is None:
        raise HTTPException(404, f"no sweep with id {sweep_id!r}")
    return sweep


@router.post("", status_code=201, dependencies=[Authorized])
def create_sweep(
    spec: SweepSpec,
    store: StoreDep,
    settings: SettingsDep,
    scheduler: SchedulerDep,
    tracking: TrackingDep,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> SweepPublic:
    """Validate, persist (before answering) and queue a sweep. Replays of an Idempotency-Key return it (200)."""
    spec, relative = with_server_paths(spec, settings)  # as stored and run: relative paths resolved here (absolute)
    with store.read() as s:
        replay = _replay(s, spec, idempotency_key, response, store, tracking)
        if replay is not None:
            return replay
    warnings = preflight_or_422(spec, settings, scheduler, relative=relative)  # outside a transaction: it reads files
    try:
        with store.session() as s:
            sweep = Sweep(
                name=spec.name,
                spec=spec.model_dump(mode="json"),
                task_name=task_key(spec),
                model_name=model_key(spec),
                idempotency_key=idempotency_key,
                status=SweepStatus.QUEUED,
            )
            s.add(sweep)
            s.flush()
            store.set_spec(sweep, spec)  # kept parsed: the stored JSON is not parsed again in this process
            public = _public(sweep, store, tracking)
    except IntegrityError:  # the same new key in two requests at once: the other one stored it first
        if not idempotency_key:
            raise
        with store.read() as s:
            return _replay(s, spec, idempotency_key, response, store, tracking)
    if scheduler is not None:
        scheduler.wake()  # committed: admitted now rather than after the scheduler's poll sleep
    return public.model_copy(update={"warnings": warnings})


def _replay(
    s, spec: SweepSpec, key: str | None, response: Response, store: StoreDep, tracking: TrackingDep
) -> SweepPublic | None:
    """The sweep stored under Idempotency-Key ``key`` (status 200), None if there is none.

    Raises:
        HTTPException: 409, the key was used for a different spec.
    """
    if not key:
        return None
    existing = s.scalars(select(Sweep).where(Sweep.idempotency_key == key)).first()
    if existing is None:
        return None
    if existing.spec != spec.model_dump(mode="json"):
        raise HTTPException(409, f"Idempotency-Key {key!r} was used for a different spec (sweep {existing.id}); use a new key")
    response.status_code = 200
    return _public(existing, store, tracking)


@router.get("")
def list_sweeps(store: StoreDep, tracking: TrackingDep, limit: int = 100) -> list[SweepPublic]:
    """The latest ``limit`` sweeps; a stored row that cannot be rendered is listed as unreadable, saying why,
    instead of failing the list."""
    with store.read() as s:
        rows = s.scalars(select(Sweep).order_by(Sweep.created_at.desc()).limit(max(1, min(limit, 1000))))
        return [_listed(w, store, tracking) for w in rows]


def _readable(store: StoreDep, sweep: Sweep) -> SweepSpec | None:
    """The sweep's spec, None if its stored row cannot be read back (see _listed)."""
    try:
        return store.spec(sweep)
    except ValueError:
        return None


def _listed(sweep: Sweep, store: StoreDep, tracking: TrackingDep) -> SweepPublic:
    try:
        return _public(sweep, store, tracking)  # store.spec re-validates the stored spec: a value refused now fails here
    except Exception as e:  # noqa: BLE001 - one bad row (stored before its values were checked) is reported, not raised
        log.warning("sweep %s cannot be rendered: %s: %s", sweep.id, type(e).__name__, str(e)[:200])
        return unreadable_public(sweep, f"{type(e).__name__}: {str(e)[:200]}")


@router.get("/{sweep_id}")
def get_sweep(sweep_id: str, store: StoreDep, tracking: TrackingDep) -> SweepPublic:
    with store.read() as s:
        return _listed(_get(store, s, sweep_id), store, tracking)


@router.delete("/{sweep_id}", dependencies=[Authorized], response_model=None)
def cancel_sweep(
    sweep_id: str,
    store: StoreDep,
    settings: SettingsDep,
    tracking: TrackingDep,
    scheduler: SchedulerDep,
    purge: Annotated[bool, Query(description="delete a finished sweep (service.purge) instead of cancelling it")] = False,
) -> SweepPublic | dict:
    """Cancel: the sweep, its trials and lr tunings are cancelled now (service.lifecycle.cancel_sweep); the
    scheduler stops the running ones' workers within seconds and then ends the MLflow runs. With
    ``purge=true``: delete a finished sweep, its MLflow runs (to the deleted stage) and checkpoints (409 while it runs)."""
    if purge:
        with store.session() as s:
            sweep = _get(store, s, sweep_id, lock=True)  # two purges at once: the second waits, then finds none
            try:
                left = purge_sweep(s, sweep, _readable(store, sweep))
            except PurgeRefused as e:
                raise HTTPException(409, str(e)) from None
        runs, failed = clean_up(left, tracking, settings)  # after the commit
        return {"id": sweep_id, "deleted": True, "mlflow_runs_deleted": runs, "mlflow_runs_not_deleted": failed}
    with store.session() as s:
        sweep = _get(store, s, sweep_id)
        lifecycle.cancel_sweep(s, sweep)
        public = _listed(sweep, store, tracking)
    if scheduler is not None:
        scheduler.wake()
    return public


class Extension(BaseModel):
    """What ``POST /v1/sweeps/{id}/extend`` adds to a finished sweep."""

    model_config = {"extra": "forbid"}
    group_sizes: list[int] = Field(default_factory=list, max_length=256, description="group sizes to add (each divides B)")
    seeds: list[int] = Field(default_factory=list, max_length=1000, description="seeds to add at every (G, B)")

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        """An unknown field is refused at its path, listing this body's fields (pydantic's extra_forbidden would be read
        as a sweep spec's by error_message, listing every spec field)."""
        unknown = [k for k in data if k not in cls.model_fields] if isinstance(data, dict) else []
        if unknown:
            errors = [
                InitErrorDetails(
                    type=PydanticCustomError("unknown_field", unknown_field_message([k], cls) or ""), loc=(k,), input=data[k]
                )
                for k in unknown
            ]
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return data


@router.post("/{sweep_id}/extend", dependencies=[Authorized])
def extend(
    sweep_id: str, body: Extension, store: StoreDep, settings: SettingsDep, scheduler: SchedulerDep, tracking: TrackingDep
) -> SweepPublic:
    """Add group sizes or seeds to a succeeded or failed grid sweep (service.extend): only the new trials run,
    then every trial is fitted again. 409 while the sweep is not finished; 422 for a spec it would make invalid."""
    with store.read() as s:
        sweep = _get(store, s, sweep_id)
        try:
            new = extended_spec(store.spec(sweep), body.group_sizes, body.seeds)
        except ValidationError as e:
            raise RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in e.errors()]) from None
        except ExtendRefused as e:
            raise HTTPException(e.status, e.message) from None
    preflight_or_422(new, settings, scheduler)  # trial and step limits, the data and model files
    with store.session() as s:
        sweep = _get(store, s, sweep_id)
        try:
            added = extend_sweep(s, store, sweep, new)
        except ExtendRefused as e:
            raise HTTPException(e.status, e.message) from None
        public = _public(sweep, store, tracking)
        parent = sweep.mlflow_parent_run_id
    if tracking and parent:  # after the commit: no MLflow call inside a transaction
        try:
            tracking.reopen_sweep(parent, new, len(added))
        except Exception:  # noqa: BLE001 - the trials run all the same; the parent run shows the old status meanwhile
            log.exception("reopening the MLflow parent run %s of sweep %s failed", parent, sweep_id)
    if scheduler is not None:
        scheduler.wake()
    return public


@router.get("/{sweep_id}/trials")
def list_trials(sweep_id: str, store: StoreDep) -> list[TrialPublic]:
    with store.read() as s:
        _get(store, s, sweep_id)
        trials = s.scalars(select(Trial).where(Trial.sweep_id == sweep_id).order_by(Trial.position))
        return [TrialPublic.model_validate(t) for t in trials]


def _named_answer(s: Session, answer_id: str) -> Probe:
    """The answer ``answer_id`` with its result: 404 when there is no answer of that id, 422 when it has no result."""
    row = s.get(Probe, answer_id)
    if row is None or row.kind != ProbeKind.ANSWER:
        raise HTTPException(404, f"no answer with id {answer_id!r}")
    if row.result is None or row.status != ProbeStatus.SUCCEEDED:
        raise HTTPException(422, f"answer: {answer_id!r} has no result (status {row.status}); name a succeeded answer")
    return row


@router.get("/{sweep_id}/fit")
def get_fit(
    sweep_id: str,
    store: StoreDep,
    step: Annotated[
        int | None, Query(ge=1, description="an eval checkpoint (eval.every): the fit of the gap at that step")
    ] = None,
    answer: Annotated[
        str | None,
        Query(
            description="an answer's id: the final fit's message sets it beside the grid (default: the latest answer "
            "of the same task, model and training settings)"
        ),
    ] = None,  # fmt: skip
) -> LawFit:
    """The stored fit (the final one, or an adaptive sweep's running fit); otherwise a provisional fit of
    the trials finished so far. With ``step``, the fit at that eval checkpoint (422 naming the checkpoints
    when it is not one). A succeeded grid's fit cites ``answer`` (404 when there is no answer of that id, 422 when
    it has no result), else the latest answer that asked its question (identity.question), else none."""
    with store.read() as s:
        sweep = _get(store, s, sweep_id)
        if step is not None:
            try:
                return fit_from_trials(sweep.trials, store.spec(sweep), n_boot=100, step=step)
            except ValueError as e:
                raise HTTPException(422, str(e)) from None
        if sweep.fit is not None:
            fit = LawFit.model_validate(sweep.fit)
            if sweep.status != SweepStatus.SUCCEEDED:
                return fit
            keys, which = (sweep.task_name, sweep.model_name), "named" if answer else "the latest of this spec"
            if answer is not None:
                cited = _named_answer(s, answer)
            else:  # a finished grid against the latest cheap answer of its spec, never another spec's
                cited = latest_job(s, store, ProbeKind.ANSWER, keys, like=store.spec(sweep))
            if cited is not None:
                fit.message += f"; answer {cited.id} ({which}): {answer_agreement(fit, cited.result)}"
            return fit
        fit = fit_from_trials(sweep.trials, store.spec(sweep), n_boot=50)
        kind = "provisional" if sweep.status not in lifecycle.SWEEP_TERMINAL else "partial"
        fit.message = f"{kind} (sweep {sweep.status}, fit of the trials that finished): " + fit.message
        return fit
