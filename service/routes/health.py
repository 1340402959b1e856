"""/v1/health: controller, Ray, MLflow and store."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from sqlalchemy import text

from service.deps import Credentials, SchedulerDep, StoreDep, TrackingDep, reads_open
from service.schemas import ComponentHealth, Health

router = APIRouter(prefix="/v1/health", tags=["health"])


@router.get("")
def health(
    store: StoreDep,
    scheduler: SchedulerDep,
    tracking: TrackingDep,
    response: Response,
    request: Request,
    credentials: Credentials,
) -> Health:
    """200 when every component answers, else 503 with the failing ones marked. Open to all; with a
    token set, a caller without it (and reads not public) gets up/down only: no URIs, resources or workers."""
    try:
        with store.session() as s:
            s.execute(text("SELECT 1"))
        db = ComponentHealth(ok=True)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        db = ComponentHealth(ok=False, detail=type(e).__name__)
    ray_ok = scheduler is not None and scheduler.healthy()
    ray = ComponentHealth(ok=ray_ok, detail=f"{scheduler.cluster_resources()}" if ray_ok else "not connected")
    ml = ComponentHealth(ok=bool(tracking and tracking.healthy()), detail=tracking.public_uri if tracking else "not configured")
    ok = db.ok and ray.ok and ml.ok
    response.status_code = 200 if ok else 503
    if not reads_open(request, credentials):
        ray, ml, db = (ComponentHealth(ok=c.ok) for c in (ray, ml, db))
        return Health(status="ok" if ok else "degraded", controller=ComponentHealth(ok=True), ray=ray, mlflow=ml, store=db)
    workers = scheduler.pool() if ray_ok else {}
    return Health(
        status="ok" if ok else "degraded", controller=ComponentHealth(ok=True), ray=ray, mlflow=ml, store=db, workers=workers
    )
