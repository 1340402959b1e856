"""From stored trials to the law fit and to the public JSON shapes."""

from __future__ import annotations

from collections.abc import Sequence

from service.schemas import MlflowLinks, Progress, SweepPublic, TrialPublic
from service.store import Sweep, Trial
from sweeps.law import LawFit, fit_law

FIT_METRIC = "gap"  # THEORY.md: max reward - achieved expected reward on the held-out set


def fit_from_trials(trials: Sequence[Trial], n_boot: int = 200) -> LawFit:
    """Fit the law on succeeded trials (no_signal, failed and unfinished trials are not data points).

    A sweep whose usable trials are all no_signal gets status no_signal.
    """
    done = [t for t in trials if t.status == "succeeded"]
    if not done and any(t.status == "no_signal" for t in trials):
        return LawFit(status="no_signal", message="every finished trial was no_signal (no learning signal)")
    fit = fit_law(
        [t.group_size for t in done],
        [t.samples_per_step for t in done],
        [t.seed for t in done],
        [t.metrics.get(FIT_METRIC) if t.metrics.get(FIT_METRIC) is not None else float("nan") for t in done],
        metric=FIT_METRIC,
        n_boot=n_boot,
    )
    excluded = [t for t in trials if t.status in ("no_signal", "failed")]
    if excluded:
        fit.message += f" ({len(excluded)} no_signal/failed trials excluded)"
    return fit


def progress_of(sweep: Sweep) -> Progress:
    statuses = [t.status for t in sweep.trials]
    total = len(statuses) or SweepPublic.planned_trials(sweep.spec)
    return Progress(
        done=sum(s in ("succeeded", "no_signal") for s in statuses),
        running=statuses.count("running"),
        failed=statuses.count("failed"),
        cancelled=statuses.count("cancelled"),
        total=total,
    )


def sweep_public(sweep: Sweep, tracking_uri: str | None, run_url: str | None) -> SweepPublic:
    return SweepPublic(
        id=sweep.id,
        name=sweep.name,
        status=sweep.status,
        spec=sweep.spec,
        progress=progress_of(sweep),
        mlflow=MlflowLinks(
            tracking_uri=tracking_uri,
            experiment_id=sweep.mlflow_experiment_id,
            parent_run_id=sweep.mlflow_parent_run_id,
            url=run_url,
        ),
        fit_status=(sweep.fit or {}).get("status"),
        g_star=(sweep.fit or {}).get("g_star"),
        recommended_group_size=(sweep.fit or {}).get("recommended_group_size"),
        created_at=sweep.created_at,
        updated_at=sweep.updated_at,
        error=sweep.error,
    )


def trial_public(trial: Trial) -> TrialPublic:
    return TrialPublic(
        id=trial.id,
        sweep_id=trial.sweep_id,
        group_size=trial.group_size,
        samples_per_step=trial.samples_per_step,
        prompts_per_step=trial.samples_per_step // trial.group_size,
        seed=trial.seed,
        status=trial.status,
        metrics=trial.metrics or {},
        reason=trial.reason,
        mlflow_run_id=trial.mlflow_run_id,
        attempts=trial.attempts,
        seconds=trial.seconds,
        updated_at=trial.updated_at,
    )
