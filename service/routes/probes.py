"""/v1/probes: estimate G* from one batch of rollouts (workers.probe), run on Ray; the queue and read of every
probe-shaped job (a probe, an answer: service.routes.answers) live here."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from service.deps import Authorized, ReadAuthorized, SchedulerDep, SettingsDep, StoreDep, preflight_or_422
from service.lifecycle import ProbeStatus
from service.scheduler import Scheduler
from service.schemas import ProbePublic
from service.server_paths import with_server_paths
from service.store import Probe, ProbeKind, Store
from sweeps.spec import SweepSpec

router = APIRouter(prefix="/v1/probes", tags=["probes"], dependencies=[ReadAuthorized])  # writes: Authorized too


def queue_job(
    kind: ProbeKind, spec: SweepSpec, store: Store, scheduler: Scheduler | None, public: type[ProbePublic]
) -> ProbePublic:
    """Store a queued probe or answer of ``spec`` (already checked) and wake the scheduler once it is committed."""
    with store.session() as s:
        row = Probe(spec=spec.model_dump(mode="json"), status=ProbeStatus.QUEUED, kind=kind)
        s.add(row)
        s.flush()
        out = public.model_validate(row)
    if scheduler is not None:
        scheduler.wake()  # committed: started now rather than after the scheduler's poll sleep
    return out


def read_job(kind: ProbeKind, job_id: str, store: Store, public: type[ProbePublic]) -> ProbePublic:
    """A probe or answer by id; 404 when there is none of that kind."""
    with store.read() as s:
        row = s.get(Probe, job_id)
        if row is None or row.kind != kind:
            raise HTTPException(404, f"no {kind} with id {job_id!r}")
        return public.model_validate(row)


@router.post("", status_code=201, dependencies=[Authorized])
def create_probe(spec: SweepSpec, store: StoreDep, settings: SettingsDep, scheduler: SchedulerDep) -> ProbePublic:
    """Queue a probe of the spec's task and model (``probe`` section: K prompts, M completions)."""
    spec, relative = with_server_paths(spec, settings)
    preflight_or_422(spec, settings, scheduler, processes=1, relative=relative)  # on one process (launching.Launcher)
    return queue_job(ProbeKind.PROBE, spec, store, scheduler, ProbePublic)


@router.get("/{probe_id}")
def get_probe(probe_id: str, store: StoreDep) -> ProbePublic:
    return read_job(ProbeKind.PROBE, probe_id, store, ProbePublic)
