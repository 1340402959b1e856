"""/v1/recommendations: which G to use for a task and model, from the latest finished sweep."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from sqlalchemy import select

from service.deps import StoreDep
from service.schemas import Recommendation
from service.store import Sweep
from sweeps.law import LawFit, recommend_group_size
from sweeps.spec import MAX_SAMPLES_PER_STEP, valid_group_sizes

router = APIRouter(prefix="/v1/recommendations", tags=["recommendations"])
_RANK = {"ok": 0, "boundary": 1}  # prefer a sweep whose fit has an interior optimum


def _evidence(sweep: Sweep) -> tuple:
    """Sort key, best first: an interior optimum, then a closed interval, a narrower one, more trials."""
    fit = sweep.fit
    ci = fit.get("g_star_ci95") or [None, None]
    width = ci[1] - ci[0] if None not in ci else float("inf")
    return (_RANK.get(fit["status"], 2), width, -fit.get("n_rows", 0))


@router.get("")
def recommend(
    store: StoreDep,
    task: Annotated[str, Query(min_length=1, max_length=64)],
    model: Annotated[str, Query(min_length=1, max_length=4096)],
    samples_per_step: Annotated[int | None, Query(ge=2, le=MAX_SAMPLES_PER_STEP)] = None,
) -> Recommendation:
    """The best-supported fit among succeeded sweeps of (task, model) (see _evidence), not merely the latest.

    G* does not depend on the budget (THEORY.md), so for a given B the answer is the divisor of B
    that minimises the law's shape G + (G* - 1)^2 / (G - 1).
    """
    with store.session() as s:
        sweeps = list(
            s.scalars(
                select(Sweep)
                .where(Sweep.task_name == task, Sweep.model_name == model, Sweep.status == "succeeded", Sweep.fit.is_not(None))
                .order_by(Sweep.created_at.desc())
            )
        )
    if not sweeps:
        raise HTTPException(404, f"no finished sweep for task={task!r}, model={model!r}; submit one first")
    best = min(sweeps, key=_evidence)
    fit = LawFit.model_validate(best.fit)
    rec, message = fit.recommended_group_size, fit.message
    if samples_per_step is not None and rec is not None:
        candidates = valid_group_sizes(samples_per_step)
        if fit.g_star is not None:
            rec = recommend_group_size(fit.g_star, candidates)
            message = f"G* = {fit.g_star:.3g}; the best divisor of B={samples_per_step} is {rec}"
        else:
            rec = min(candidates, key=lambda g: abs(g - fit.recommended_group_size))
            message = f"{fit.status}: closest valid G to the grid edge at B={samples_per_step}. " + fit.message
    return Recommendation(
        task=task,
        model=model,
        samples_per_step=samples_per_step,
        recommended_group_size=rec,
        g_star=fit.g_star,
        g_star_ci95=fit.g_star_ci95,
        status=fit.status,
        sweep_id=best.id,
        message=message,
    )
