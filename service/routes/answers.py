"""/v1/answers: which G, for a fraction of a grid's cost (sweeps.answer, workers.answers), run on Ray."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError

from service.deps import Authorized, ReadAuthorized, SchedulerDep, SettingsDep, StoreDep, preflight_or_422
from service.preflight import SpecError, preflight_answer
from service.routes.probes import queue_job, read_job
from service.schemas import AnswerPublic
from service.server_paths import with_server_paths
from service.store import ProbeKind
from sweeps.spec import SweepSpec

router = APIRouter(prefix="/v1/answers", tags=["answers"], dependencies=[ReadAuthorized])  # writes: Authorized too


@router.post("", status_code=201, dependencies=[Authorized])
def create_answer(spec: SweepSpec, store: StoreDep, settings: SettingsDep, scheduler: SchedulerDep) -> AnswerPublic:
    """Queue an answer for the grid the spec describes, within ``answer.budget`` sampled completions (default 1% of
    that grid): the probe, a pilot trial and a successive-halving sweep; the result has status, g_star,
    g_star_ci95, recommended_group_size, tie_set, evidence, g_matters, baseline (keep ``answer.baseline_group_size`` or
    move), regret_g8, regret_passrate and cost."""
    spec, relative = with_server_paths(spec, settings)
    try:
        preflight_answer(spec)
    except SpecError as e:
        raise RequestValidationError([{"loc": ("body", *e.loc), "msg": e.msg, "type": "value_error"}]) from e
    preflight_or_422(spec, settings, scheduler, processes=1, relative=relative)  # on one process (launching.Launcher)
    return queue_job(ProbeKind.ANSWER, spec, store, scheduler, AnswerPublic)


@router.get("/{answer_id}")
def get_answer(answer_id: str, store: StoreDep) -> AnswerPublic:
    return read_job(ProbeKind.ANSWER, answer_id, store, AnswerPublic)
