"""/v1/probes: estimate G* from one batch of rollouts (workers.probe), run on Ray."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel

from service.deps import Authorized, StoreDep
from service.store import Probe
from sweeps.spec import SweepSpec

router = APIRouter(prefix="/v1/probes", tags=["probes"])


class ProbePublic(BaseModel):
    id: str
    status: str
    spec: dict
    result: dict | None = None
    error: str | None = None
    mlflow_run_id: str | None = None
    created_at: datetime
    updated_at: datetime


def _public(p: Probe) -> ProbePublic:
    return ProbePublic(
        id=p.id,
        status=p.status,
        spec=p.spec,
        result=p.result,
        error=p.error,
        mlflow_run_id=p.mlflow_run_id,
        created_at=p.created_at,
        updated_at=p.updated_at,
    )


@router.post("", status_code=201, dependencies=[Authorized])
def create_probe(spec: SweepSpec, store: StoreDep) -> ProbePublic:
    """Queue a probe of the spec's task and model (``probe`` section: K prompts, M completions)."""
    with store.session() as s:
        probe = Probe(spec=spec.model_dump(mode="json"), status="queued")
        s.add(probe)
        s.flush()
        return _public(probe)


@router.get("/{probe_id}")
def get_probe(probe_id: str, store: StoreDep) -> ProbePublic:
    with store.session() as s:
        probe = s.get(Probe, probe_id)
        if probe is None:
            raise HTTPException(404, f"no probe with id {probe_id!r}")
        return _public(probe)
