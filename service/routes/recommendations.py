"""/v1/recommendations: which G to use for a task and model, from the best-supported finished sweep of that task and model."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from sqlalchemy import or_, select

from service.deps import ReadAuthorized, StoreDep
from service.lifecycle import SweepStatus
from service.results import latest_job
from service.schemas import Recommendation
from service.store import ProbeKind, Store, Sweep
from sweeps.fit import LawFit, recommend_group_size
from sweeps.report import agreement
from sweeps.spec import MAX_SAMPLES_PER_STEP, valid_group_sizes

# writes: Authorized too
router = APIRouter(prefix="/v1/recommendations", tags=["recommendations"], dependencies=[ReadAuthorized])
_RANK = {"ok": 0, "boundary": 1}  # prefer a sweep whose fit has an interior optimum
_EVIDENCE = {"strong": 0, "weak": 1, "empirical": 2}  # empirical: a measured best G where the law does not fit
PROBE_KEYS = ("g_star", "g_star_ci95", "recommended_group_size")  # then the stronger evidence (sweeps.fit: none gives no G)


def _support(sweep: Sweep) -> tuple:
    """Sort key, best first: stronger evidence, an interior optimum, a closed interval, a narrower one, more trials."""
    fit = sweep.fit
    ci = fit.get("g_star_ci95") or [None, None]
    width = ci[1] - ci[0] if None not in ci else float("inf")
    return (_EVIDENCE.get(fit.get("evidence"), 3), _RANK.get(fit["status"], 2), width, -fit.get("n_rows", 0))


@router.get("")
def recommend(
    store: StoreDep,
    task: Annotated[str, Query(min_length=1, max_length=64, description="a sweep's task_key, or a dataset task's label")],
    model: Annotated[
        str, Query(min_length=1, max_length=4096, description="a sweep's model_key, a preset, or a model folder's path")
    ],
    samples_per_step: Annotated[int | None, Query(ge=2, le=MAX_SAMPLES_PER_STEP)] = None,
) -> Recommendation:
    """The best-supported fit among succeeded sweeps of (task, model) (see _support), not merely the latest.

    G* does not depend on the budget (THEORY.md), so for a given B the answer is the divisor of B
    that minimises the law's shape G + (G* - 1)^2 / (G - 1).
    """
    sweeps = _finished_sweeps(store, task, model)
    if not sweeps:
        raise HTTPException(
            404,
            f"no finished sweep for task={task!r}, model={model!r}; submit one first "
            "(task and model are a sweep's task_key and model_key, or a dataset's label and a model's path)",
        )
    keys = sorted({(w.task_name, w.model_name) for w in sweeps})
    if len(keys) > 1:
        raise HTTPException(
            409,
            f"task={task!r}, model={model!r} names {len(keys)} different (task_key, model_key) pairs "
            f"(other data or another model config): {keys[:10]}; ask for one of them",
        )
    best = min(sweeps, key=_support)
    with store.read() as s:
        probe = latest_job(s, store, ProbeKind.PROBE, (best.task_name, best.model_name))
        probed = None if probe is None else {"id": probe.id, **{k: probe.result.get(k) for k in PROBE_KEYS}}
    fit = LawFit.model_validate(best.fit)
    rec, message = _at_budget(fit, samples_per_step)
    if probed is not None:
        g = probed["g_star"]
        message += f"; probe {probed['id']}: G* = {'none' if g is None else f'{g:.3g}'}. {agreement(fit, probed)}"
    kept = fit.model_dump(include={"g_star", "g_star_ci95", "status", "evidence", "evidence_reason", "comparison"})
    return Recommendation(
        **kept, task=task, model=model, task_key=best.task_name, model_key=best.model_name, sweep_id=best.id,
        samples_per_step=samples_per_step, recommended_group_size=rec, probe=probed, message=message,
    )  # fmt: skip


def _finished_sweeps(store: Store, task: str, model: str) -> list[Sweep]:
    """The succeeded, fitted sweeps of (task, model), newest first: those of the exact keys, else those a label (my-math)
    or a model folder's path names (every version of it)."""
    with store.read() as s:
        finished = select(Sweep).where(Sweep.status == SweepStatus.SUCCEEDED, Sweep.fit.is_not(None))
        finished = finished.order_by(Sweep.created_at.desc())
        exact = list(s.scalars(finished.where(Sweep.task_name == task, Sweep.model_name == model)))
        named = finished.where(
            or_(Sweep.task_name == task, Sweep.task_name.startswith(f"{task}:", autoescape=True)),
            or_(Sweep.model_name == model, Sweep.model_name.startswith(f"{model}@", autoescape=True)),
        )
        return exact or list(s.scalars(named))


def _at_budget(fit: LawFit, samples_per_step: int | None) -> tuple[int | None, str]:
    """(the G to use, the message): the fit's own, or at budget B the divisor of B the law prefers (the closest to the
    grid's edge when the fit has no G*; the measured G's closest when its evidence is empirical)."""
    rec, message = fit.recommended_group_size, fit.message
    if samples_per_step is None or rec is None:
        return rec, message
    candidates = valid_group_sizes(samples_per_step)
    if fit.g_star is not None and fit.evidence != "empirical":  # empirical: the measured G, not the law's pick
        rec = recommend_group_size(fit.g_star, candidates)
        message = f"G* = {fit.g_star:.3g}; the best divisor of B={samples_per_step} is {rec}"
    else:
        rec = min(candidates, key=lambda g: abs(g - fit.recommended_group_size))
        message = f"{fit.status}: closest valid G to the grid edge at B={samples_per_step}. " + fit.message
    if fit.evidence == "weak" and "weak evidence" not in message:
        message += f"; weak evidence: {fit.evidence_reason}"
    return rec, message
