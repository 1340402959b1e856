"""/v1/answers: which G, for a fraction of a grid's cost (sweeps.answer, workers.answer), run on Ray."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.exceptions import RequestValidationError

from service.deps import Authorized, ReadAuthorized, SchedulerDep, SettingsDep, StoreDep, preflight_or_422
from service.lifecycle import ProbeStatus
from service.preflight import SpecError, preflight_answer, with_server_paths
from service.schemas import AnswerPublic
from service.store import Probe, ProbeKind
from sweeps.spec import SweepSpec

router = APIRouter(prefix="/v1/answers", tags=["answers"], dependencies=[ReadAuthorized])  # writes: Authorized too


@router.post("", status_code=201, dependencies=[Authorized])
def create_answer(spec: SweepSpec, store: StoreDep, settings: SettingsDep, scheduler: SchedulerDep) -> AnswerPublic:
    """Queue an answer for the grid the spec describes, within ``answer.budget`` sampled completions (default 1% of
    that grid): the probe, a pilot trial and a successive-halving sweep; the result has status, g_star,
    g_star_ci95, recommended_group_size, tie_set, evidence, g_matters, regret_g8, regret_passrate and cost."""
    spec = with_server_paths(spec, settings)
    try:
        preflight_answer(spec)
    except SpecError as e:
        raise RequestValidationError([{"loc": ("body", *e.loc), "msg": e.msg, "type": "value_error"}]) from e
    preflight_or_422(spec, settings, scheduler)
    with store.session() as s:
        row = Probe(spec=spec.model_dump(mode="json"), status=ProbeStatus.QUEUED, kind=ProbeKind.ANSWER)
        s.add(row)
        s.flush()
        public = AnswerPublic.model_validate(row)
    if scheduler is not None:
        scheduler.wake()  # committed: started now rather than after the scheduler's poll sleep
    return public


@router.get("/{answer_id}")
def get_answer(answer_id: str, store: StoreDep) -> AnswerPublic:
    with store.read() as s:
        row = s.get(Probe, answer_id)
        if row is None or row.kind != ProbeKind.ANSWER:
            raise HTTPException(404, f"no answer with id {answer_id!r}")
        return AnswerPublic.model_validate(row)
