"""/v1/health: controller, Ray, MLflow and store, each checked on a thread of its own and given HEALTH_S to answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from sqlalchemy import text

from service.deps import Credentials, SchedulerDep, StoreDep, TrackingDep, reads_open
from service.schemas import ComponentHealth, Health

router = APIRouter(prefix="/v1/health", tags=["health"])
HEALTH_S = 0.8  # a component that has not answered by then is reported down: /v1/health answers within 1 s


class Check:
    """One component's check, run on a daemon thread; a check still running from an earlier request is
    waited for rather than started again, so a hung component (a database that does not answer a connect,
    a stopped Ray head) holds one thread, not one per request."""

    def __init__(self, fn: Callable[[], tuple[bool, str, Any]]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._result: tuple[bool, str, Any] = (False, "not checked", None)

    def start(self) -> threading.Thread:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="groupscale-health", daemon=True)
                self._thread.start()
            return self._thread

    def _run(self) -> None:
        try:
            self._result = self._fn()
        except Exception as e:  # noqa: BLE001 - reported, not raised
            self._result = (False, type(e).__name__, None)

    def result(self, thread: threading.Thread, deadline: float) -> tuple[bool, str, Any]:
        """(ok, detail, extra) once the check ended, or down "no answer within HEALTH_S" at ``deadline``."""
        thread.join(max(0.0, deadline - time.monotonic()))
        return (False, f"no answer within {HEALTH_S:g} s", None) if thread.is_alive() else self._result


def _checks(request: Request, store: Any, scheduler: Any, tracking: Any) -> dict[str, Check]:
    """The app's three checks, made on its first health request."""
    checks = getattr(request.app.state, "health_checks", None)
    if checks is None:

        def store_ok() -> tuple[bool, str, Any]:
            with store.read() as s:  # a read: never waits for the scheduler's write transactions
                s.execute(text("SELECT 1"))
            return True, "", None

        def ray_ok() -> tuple[bool, str, Any]:
            if scheduler is None or not scheduler.cluster.healthy():
                return False, "not connected", None
            missing = scheduler.missing_shapes()
            if missing and not scheduler.ctx.settings.autoscaling:  # nothing will add the node: trials wait for ever
                return False, "trials wait for a node no alive node matches: " + "; ".join(missing), scheduler.cluster.pool()
            waiting = f"; waiting for the autoscaler: {'; '.join(missing)}" if missing else ""
            return True, f"{scheduler.cluster.resources()}{waiting}", scheduler.cluster.pool()

        def mlflow_ok() -> tuple[bool, str, Any]:
            if tracking is None:
                return False, "not configured", None
            return tracking.healthy(timeout_s=HEALTH_S), tracking.public_uri, None

        checks = request.app.state.health_checks = {"store": Check(store_ok), "ray": Check(ray_ok), "mlflow": Check(mlflow_ok)}
    return checks


@router.get("")
def health(
    store: StoreDep,
    scheduler: SchedulerDep,
    tracking: TrackingDep,
    response: Response,
    request: Request,
    credentials: Credentials,
) -> Health:
    """200 when every component answers, else 503 with the failing ones marked and why (within 1 s whatever is
    down). Open to all; with a token set, a caller without it (and reads not public) gets up/down only: no URIs,
    resources or workers."""
    deadline = time.monotonic() + HEALTH_S
    checks = _checks(request, store, scheduler, tracking)
    threads = {name: check.start() for name, check in checks.items()}
    results = {name: checks[name].result(thread, deadline) for name, thread in threads.items()}
    db, ray, ml = (ComponentHealth(ok=results[n][0], detail=results[n][1]) for n in ("store", "ray", "mlflow"))
    problems = scheduler.faults.problems() if scheduler is not None else []  # what keeps failing in the loop
    controller = ComponentHealth(ok=not problems, detail="; ".join(problems))
    ok = db.ok and ray.ok and ml.ok and controller.ok
    response.status_code = 200 if ok else 503
    status = "ok" if ok else "degraded"
    if not reads_open(request, credentials):
        ray, ml, db = (ComponentHealth(ok=c.ok) for c in (ray, ml, db))
        return Health(status=status, controller=ComponentHealth(ok=controller.ok), ray=ray, mlflow=ml, store=db)
    workers = results["ray"][2] or {}
    return Health(status=status, controller=controller, ray=ray, mlflow=ml, store=db, workers=workers)
