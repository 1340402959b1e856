"""/v1/probes: estimate G* from one batch of rollouts (workers.probe), run on Ray."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from service.deps import Authorized, ReadAuthorized, SchedulerDep, SettingsDep, StoreDep, preflight_or_422
from service.lifecycle import ProbeStatus
from service.preflight import with_server_paths
from service.results import probe_public
from service.schemas import ProbePublic
from service.store import Probe, ProbeKind
from sweeps.spec import SweepSpec

router = APIRouter(prefix="/v1/probes", tags=["probes"], dependencies=[ReadAuthorized])  # writes: Authorized too


@router.post("", status_code=201, dependencies=[Authorized])
def create_probe(spec: SweepSpec, store: StoreDep, settings: SettingsDep, scheduler: SchedulerDep) -> ProbePublic:
    """Queue a probe of the spec's task and model (``probe`` section: K prompts, M completions)."""
    spec = with_server_paths(spec, settings)
    preflight_or_422(spec, settings, scheduler)
    with store.session() as s:
        probe = Probe(spec=spec.model_dump(mode="json"), status=ProbeStatus.QUEUED)
        s.add(probe)
        s.flush()
        public = probe_public(probe)
    if scheduler is not None:
        scheduler.wake()  # committed: started now rather than after the scheduler's poll sleep
    return public


@router.get("/{probe_id}")
def get_probe(probe_id: str, store: StoreDep) -> ProbePublic:
    with store.read() as s:
        probe = s.get(Probe, probe_id)
        if probe is None or probe.kind != ProbeKind.PROBE:
            raise HTTPException(404, f"no probe with id {probe_id!r}")
        return probe_public(probe)
