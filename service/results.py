"""From stored trials to the law fit and to the public JSON shapes."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.identity import model_key, question, task_key
from service.lifecycle import TRIAL_USABLE, TUNING_TERMINAL, ProbeStatus, TrialStatus
from service.schemas import MlflowLinks, Progress, SweepPublic, TrialPublic
from service.store import Probe, ProbeKind, Store, Sweep, Trial
from sweeps.engines import get_engine
from sweeps.fit import LawFit, fit_law
from sweeps.over_time import fit_over_time, step_fits
from sweeps.spec import SweepSpec


def fit_from_trials(trials: Sequence[Trial], spec: SweepSpec, n_boot: int = 200, step: int | None = None) -> LawFit:
    """Fit the law on succeeded trials (no_signal, failed and unfinished trials are not data points).

    The metric is the spec's: ``gap`` for outcome sweeps, ``grad_mse`` for gradient-MSE sweeps.
    A sweep whose usable trials are all no_signal gets status no_signal. With eval.every the fit also
    holds ``by_step`` (the fit at each checkpoint) and ``time_universality`` (sweeps.over_time);
    ``step`` fits the gap at that one checkpoint instead of at the end.

    Raises:
        ValueError: ``step`` is not one of the spec's eval checkpoints (names them).
    """
    metric = spec.measure.metric
    checkpoints = spec.eval.checkpoints(spec.steps)
    if step is not None and step not in checkpoints:
        raise ValueError(f"step={step} is not an eval checkpoint of this sweep; allowed: {', '.join(map(str, checkpoints))}")
    done = [t for t in trials if t.status == TrialStatus.SUCCEEDED]
    if not done and any(t.status == TrialStatus.NO_SIGNAL for t in trials):
        return LawFit(status="no_signal", metric=metric, message="every finished trial was no_signal (no learning signal)")
    rows = ([t.group_size for t in done], [t.samples_per_step for t in done], [t.seed for t in done])
    at = "" if step is None or step == spec.steps else f"@{step}"
    fit = fit_law(
        *rows, _values(done, metric + at), metric=metric, n_boot=n_boot, y_se=[t.metrics.get(f"{metric}_se{at}") for t in done]
    )
    if step is None and len(checkpoints) > 1 and spec.measure.kind == "outcome":
        by_step = {t: _values(done, metric if t == spec.steps else f"{metric}@{t}") for t in checkpoints}
        fits, fit.time_universality = fit_over_time(*rows, by_step, metric=metric, n_boot=n_boot, known={spec.steps: fit})
        fit.by_step = step_fits(fits)
    excluded = [t for t in trials if t.status in (TrialStatus.NO_SIGNAL, TrialStatus.FAILED)]
    if excluded:
        fit.message += f" ({len(excluded)} no_signal/failed trials excluded)"
    if spec.grpo.advantage in ("mean", "mean_std", "loo_std"):
        fit.message += (
            f"; made on the {spec.grpo.advantage!r} advantage: the law is derived for loo (THEORY.md), so read G* as descriptive"
        )
    return fit


def _values(trials: Sequence[Trial], key: str) -> list[float]:
    """The trials' metric ``key`` (NaN where a trial has none: dropped and counted by the fit)."""
    return [float("nan") if t.metrics.get(key) is None else float(t.metrics[key]) for t in trials]


def report_about(sweep: Sweep) -> dict:
    """What a sweep's report (sweeps.report.render_report's keywords) adds to its fit: the spec and when it was
    submitted, for the header, and its trials as GET /v1/sweeps/{id}/trials gives them, for what each G's groups held."""
    trials = [TrialPublic.model_validate(t).model_dump(mode="json") for t in sweep.trials]
    return {"spec": sweep.spec, "created": sweep.created_at.isoformat(), "trials": trials}


def progress_of(sweep: Sweep, spec: SweepSpec) -> Progress:
    """Counts of the sweep's trials by status (done: succeeded or no_signal) and of its lr tunings."""
    statuses = [t.status for t in sweep.trials]
    adaptive = spec.mode == "adaptive"
    total = spec.n_trials if adaptive or not statuses else len(statuses)  # before admission: the plan's size
    return Progress(
        done=sum(s in TRIAL_USABLE for s in statuses),
        running=statuses.count(TrialStatus.RUNNING),
        failed=statuses.count(TrialStatus.FAILED),
        cancelled=statuses.count(TrialStatus.CANCELLED),
        total=total,
        g_star_ci95=(sweep.fit or {}).get("g_star_ci95") if adaptive else None,
        tuning_done=sum(t.status in TUNING_TERMINAL for t in sweep.lr_tunings),
        tuning_total=spec.n_tuning_trials // spec.tune_lr.trials if spec.tune_lr else 0,
    )


def sweep_public(sweep: Sweep, spec: SweepSpec, tracking_uri: str | None, run_url: str | None) -> SweepPublic:
    return SweepPublic(
        id=sweep.id,
        name=sweep.name,
        status=sweep.status,
        spec=sweep.spec,
        task_key=sweep.task_name,
        model_key=sweep.model_name,
        progress=progress_of(sweep, spec),
        mlflow=MlflowLinks(
            tracking_uri=tracking_uri,
            experiment_id=sweep.mlflow_experiment_id,
            parent_run_id=sweep.mlflow_parent_run_id,
            url=run_url,
        ),
        fit_status=(sweep.fit or {}).get("status"),
        g_star=(sweep.fit or {}).get("g_star"),
        recommended_group_size=(sweep.fit or {}).get("recommended_group_size"),
        step_structure=get_engine(spec.engine).step_structure(spec),
        created_at=sweep.created_at,
        updated_at=sweep.updated_at,
        error=sweep.error,
    )


def unreadable_public(sweep: Sweep, reason: str) -> SweepPublic:
    """A sweep whose stored spec cannot be read back or encoded (stored by an older version that did not check
    free-form values): its id, name and status, no spec, and ``error`` saying why and how to remove it."""
    return SweepPublic(
        id=sweep.id,
        name=sweep.name,
        status=sweep.status,
        spec={},
        task_key=sweep.task_name,
        model_key=sweep.model_name,
        progress=Progress(done=0, running=0, failed=0, total=0),
        mlflow=MlflowLinks(tracking_uri=None, experiment_id=sweep.mlflow_experiment_id, parent_run_id=None, url=None),
        created_at=sweep.created_at,
        updated_at=sweep.updated_at,
        error=f"the stored spec cannot be read ({reason}); remove it with `groupscale delete {sweep.id}`",
    )


def latest_job(
    s: Session, store: Store, kind: ProbeKind, keys: tuple[str, str], latest: int = 50, like: SweepSpec | None = None
) -> Probe | None:
    """The latest succeeded probe or answer (of the ``latest`` most recent of ``kind``) whose spec has these
    (task_key, model_key), and with ``like`` asks its question too (identity.question: another spec's answer is not
    this grid's)."""
    done = select(Probe).where(Probe.kind == kind, Probe.status == ProbeStatus.SUCCEEDED, Probe.result.is_not(None))
    asked = None if like is None else question(like)
    for job in s.scalars(done.order_by(Probe.created_at.desc()).limit(latest)):
        try:
            spec = store.spec(job)
            if (asked is None or question(spec) == asked) and (task_key(spec), model_key(spec)) == keys:
                return job
        except (OSError, ValueError):  # its data files moved or changed: it cannot be matched
            continue
    return None
