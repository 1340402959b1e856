"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException

from service.routes import answers, health, probes, recommendations, sweeps
from service.scheduler import Scheduler
from service.settings import Settings, get_settings
from service.store import Store
from service.tracking import Tracking
from sweeps.spec import error_message


def create_app(settings: Settings | None = None, *, run_scheduler: bool = True) -> FastAPI:
    """Build the app. The scheduler (and Ray) start in the lifespan, not at import.

    Args:
        settings: defaults to get_settings() (the environment).
        run_scheduler: False for tests of the HTTP layer alone (no Ray).
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        app.state.settings = settings
        app.state.store = Store(settings.resolved_database_url)
        app.state.tracking = Tracking(settings.mlflow_tracking_uri) if settings.mlflow_tracking_uri else None
        app.state.scheduler = None
        if run_scheduler:
            app.state.scheduler = Scheduler(app.state.store, settings, app.state.tracking)
            app.state.scheduler.start()
        try:
            yield
        finally:
            if app.state.scheduler is not None:
                app.state.scheduler.stop()
            app.state.store.engine.dispose()

    app = FastAPIOffline(  # FastAPI with /docs and /redoc served from the package, no CDN (offline clusters)
        title="groupscale",
        summary="Choose the GRPO group size G: sweeps, the group-size law fit, recommendations.",
        version="0.1.0",
        lifespan=lifespan,
    )
    for module in (sweeps, probes, answers, recommendations, health):
        app.include_router(module.router)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's 422 shape with loc, msg and type only: the input is not echoed back (it may be
        large, and NaN or infinity in it cannot be written as JSON)."""
        detail = [{"loc": list(e.get("loc", ())), "msg": error_message(e), "type": e.get("type", "")} for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})

    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    return app


class BodySizeLimit:
    """ASGI middleware: 413 for a request body over max_bytes (declared or streamed)."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._reject(send)
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge(self.max_bytes)
            return message

        try:
            return await self.app(scope, limited_receive, send)
        except _TooLarge:
            return await self._reject(send)

    async def _reject(self, send) -> None:
        body = b'{"detail":"request body too large: at most %d bytes"}' % self.max_bytes
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _TooLarge(HTTPException):
    """An HTTPException, so that FastAPI, reading a streamed body when the limit is passed, re-raises it as
    the 413 it is instead of turning it into a 400 "error parsing the body"."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body too large: at most {max_bytes} bytes")
