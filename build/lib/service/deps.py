"""FastAPI dependencies: the store, the scheduler, tracking, and the bearer-token check."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError

from service.preflight import SpecError, preflight
from service.scheduler import Scheduler
from service.settings import Settings
from service.store import Store
from service.tracking import Tracking
from sweeps.spec import SweepSpec


def _store(request: Request) -> Store:
    return request.app.state.store


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _scheduler(request: Request) -> Scheduler | None:
    return request.app.state.scheduler


def _tracking(request: Request) -> Tracking | None:
    return request.app.state.tracking


def require_token(request: Request, authorization: Annotated[str | None, Header()] = None) -> None:
    """Mutating endpoints: ``Authorization: Bearer $GROUPSCALE_API_TOKEN`` when a token is set."""
    token = request.app.state.settings.api_token
    if not token:
        return
    if not authorization or not secrets.compare_digest(authorization, f"Bearer {token}"):
        raise HTTPException(
            401,
            "missing or wrong bearer token (Authorization: Bearer $GROUPSCALE_API_TOKEN)",
            headers={"WWW-Authenticate": "Bearer"},
        )


def preflight_or_422(spec: SweepSpec, settings: Settings, scheduler: Scheduler | None) -> None:
    """Run service.preflight and turn its SpecError into FastAPI's 422 shape (field path + reason)."""
    try:
        preflight(spec, settings, scheduler.cluster_resources() if scheduler else None)
    except SpecError as e:
        raise RequestValidationError([{"loc": ("body", *e.loc), "msg": e.msg, "type": "value_error"}]) from e


StoreDep = Annotated[Store, Depends(_store)]
SettingsDep = Annotated[Settings, Depends(_settings)]
SchedulerDep = Annotated[Scheduler | None, Depends(_scheduler)]
TrackingDep = Annotated[Tracking | None, Depends(_tracking)]
Authorized = Depends(require_token)
