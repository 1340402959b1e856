"""FastAPI dependencies: the store, the scheduler, tracking, and the bearer-token checks."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.cluster_checks import check_engine_on_cluster, check_rewards_on_cluster
from service.preflight import SpecError, preflight
from service.scheduler import Scheduler
from service.server_paths import relative_note
from service.settings import Settings
from service.store import Store
from service.tracking import Tracking
from sweeps.spec import SweepSpec


def _state(name: str) -> Callable[[Request], Any]:
    """A dependency that gives the app's ``name`` (its store, settings, scheduler or MLflow, set by create_app)."""

    def dependency(request: Request) -> Any:
        return getattr(request.app.state, name)

    return dependency


# The bearer scheme in the OpenAPI page (so /docs can authorize); a missing header is ours to refuse.
bearer = HTTPBearer(auto_error=False, description="GROUPSCALE_API_TOKEN, when the server sets one")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def token_ok(request: Request, credentials: HTTPAuthorizationCredentials | None) -> bool:
    """True when the server sets no token, or the request's bearer credentials are that token
    (compared in constant time)."""
    token = request.app.state.settings.api_token
    if not token:
        return True
    return credentials is not None and secrets.compare_digest(credentials.credentials.encode(), token.encode())


def reads_open(request: Request, credentials: HTTPAuthorizationCredentials | None) -> bool:
    """Whether this request may read: the token, or no token set, or GROUPSCALE_PUBLIC_READS=1."""
    return request.app.state.settings.public_reads or token_ok(request, credentials)


def _refuse() -> None:
    raise HTTPException(
        401, "missing or wrong bearer token (Authorization: Bearer $GROUPSCALE_API_TOKEN)", headers={"WWW-Authenticate": "Bearer"}
    )


def require_token(request: Request, credentials: Credentials) -> None:
    """Mutating endpoints: 401 unless ``Authorization: Bearer $GROUPSCALE_API_TOKEN`` when a token is set."""
    if not token_ok(request, credentials):
        _refuse()


def require_read_token(request: Request, credentials: Credentials) -> None:
    """Read endpoints: the same token, unless GROUPSCALE_PUBLIC_READS=1 opens them deliberately."""
    if not reads_open(request, credentials):
        _refuse()


def preflight_or_422(
    spec: SweepSpec,
    settings: Settings,
    scheduler: Scheduler | None,
    processes: int | None = None,
    relative: dict[tuple[str, ...], str] | None = None,
) -> list[str]:
    """Run service.preflight (and, with a cluster, the reward check on it) and turn a SpecError into FastAPI's
    422 shape (field path + reason). Returns preflight's warnings and the reward check's notes. ``processes``: as
    preflight's (1 for a probe or an answer, which run on one process whatever resources.num_processes says).
    ``relative``: the paths resolved against the controller's working directory (service.server_paths), said beside
    an error at that field, else in the warnings."""
    relative = relative or {}
    try:
        warnings = preflight(spec, settings, scheduler.cluster.nodes() if scheduler else None, processes)
        if scheduler is not None:
            warnings += check_rewards_on_cluster(spec, scheduler.cluster.run_task)
            check_engine_on_cluster(spec, scheduler.cluster.run_task, settings.model_cache_dir)
    except SpecError as e:
        msg = f"{e.msg} ({relative[e.loc]})" if e.loc in relative else e.msg
        raise RequestValidationError([{"loc": ("body", *e.loc), "msg": msg, "type": "value_error"}]) from e
    return [relative_note(spec, loc, said) for loc, said in relative.items()] + warnings


StoreDep = Annotated[Store, Depends(_state("store"))]
SettingsDep = Annotated[Settings, Depends(_state("settings"))]
SchedulerDep = Annotated[Scheduler | None, Depends(_state("scheduler"))]
TrackingDep = Annotated[Tracking | None, Depends(_state("tracking"))]
Authorized = Depends(require_token)
ReadAuthorized = Depends(require_read_token)
