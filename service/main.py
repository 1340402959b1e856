"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service.routes import health, probes, recommendations, sweeps
from service.scheduler import Scheduler
from service.settings import Settings, get_settings
from service.store import Store
from service.tracking import Tracking


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

    app = FastAPI(
        title="groupscale",
        summary="Choose the GRPO group size G: sweeps, the group-size law fit, recommendations.",
        version="0.1.0",
        lifespan=lifespan,
    )
    for module in (sweeps, probes, recommendations, health):
        app.include_router(module.router)
    return app
