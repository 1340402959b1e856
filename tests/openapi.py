"""The read endpoints of a running app, from its own OpenAPI document (so a new one cannot be left out)."""

from __future__ import annotations

import httpx


def read_urls(http: httpx.Client, sweep_id: str, probe_id: str, answer_id: str, recommend_query: str) -> list[str]:
    """Every GET under /v1 but health, its path parameters filled in; ``recommend_query`` (``task=..&model=..``)
    goes on /v1/recommendations. ``http``: an httpx.Client or FastAPI TestClient of the app."""
    paths = [p for p, ops in http.get("/openapi.json").json()["paths"].items() if "get" in ops and p.startswith("/v1/")]
    values = {"sweep_id": sweep_id, "probe_id": probe_id, "answer_id": answer_id}
    return [p.format(**values) + (f"?{recommend_query}" if "recommend" in p else "") for p in paths if p != "/v1/health"]
