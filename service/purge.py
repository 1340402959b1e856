"""Deleting a finished sweep: its store rows, its MLflow runs (to MLflow's deleted stage), checkpoints and Optuna studies.

``DELETE /v1/sweeps/{id}?purge=true`` (plain DELETE cancels). Refused while the sweep is queued,
running or fitting, and while a cancelled sweep's runs are still being closed, so nothing that is
still written to is removed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.lifecycle import SWEEP_TERMINAL
from service.settings import Settings
from service.store import Sweep
from service.tracking import Tracking
from sweeps import storage
from sweeps.spec import SweepSpec

log = logging.getLogger(__name__)


class PurgeRefused(Exception):
    """The sweep is still running (HTTP 409)."""


@dataclass(frozen=True)
class Leftovers:
    """What a purged sweep leaves outside the store, removed by ``clean_up`` once the deletion is committed."""

    run_ids: list[str]  # the trials' stored runs
    experiment_id: str | None  # where the parent's children are searched: runs made ahead for trials that never
    parent_run_id: str | None  # started are children of the parent without a trial row that names them
    trial_ids: list[str]
    study_prefix: str | None  # the Optuna studies of an adaptive or lr-tuned sweep


def purge_sweep(s: Session, sweep: Sweep, spec: SweepSpec | None) -> Leftovers:
    """Delete ``sweep``, its trials and lr tunings from the store (in ``s``'s transaction). ``spec`` None: the
    stored spec cannot be read back, and whatever Optuna studies the sweep may have are looked for.

    Raises:
        PurgeRefused: the sweep has not ended, or its MLflow runs are not closed yet.
    """
    if sweep.status not in SWEEP_TERMINAL or not sweep.mlflow_closed:
        raise PurgeRefused(f"sweep {sweep.id} is {sweep.status}: cancel it and wait until it has ended, then delete it")
    left = Leftovers(
        run_ids=[t.mlflow_run_id for t in sweep.trials if t.mlflow_run_id],
        experiment_id=sweep.mlflow_experiment_id,
        parent_run_id=sweep.mlflow_parent_run_id,
        trial_ids=[t.id for t in sweep.trials],
        study_prefix=f"groupscale-{sweep.id}" if spec is None or spec.mode == "adaptive" or spec.tune_lr is not None else None,
    )
    for row in [*sweep.trials, *sweep.lr_tunings, sweep]:
        s.delete(row)
    return left


def clean_up(left: Leftovers, tracking: Tracking | None, settings: Settings) -> tuple[int, list[str]]:
    """Move every run of the sweep to MLflow's deleted stage (``mlflow gc`` removes them for good): the parent, the
    trials' runs and every other child of the parent (runs made ahead for trials that never started, tuning runs);
    remove the checkpoints and the Optuna studies. Returns (runs deleted, ids of the runs that could not be, each
    logged)."""
    runs = _sweep_runs(left, tracking) if tracking is not None else []
    failed = []
    for run_id in runs:
        try:
            tracking.client.delete_run(run_id)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - the sweep is gone from the store; say which run is left behind
            log.exception("MLflow run %s of a deleted sweep could not be deleted", run_id)
            failed.append(run_id)
    for trial_id in left.trial_ids:
        storage.delete(settings.checkpoint_dir(trial_id))
    if left.study_prefix:
        import optuna

        studies = optuna.storages.RDBStorage(settings.resolved_database_url)
        for name in optuna.get_all_study_names(studies):
            if name == left.study_prefix or name.startswith(left.study_prefix + "-"):
                optuna.delete_study(study_name=name, storage=studies)
    return len(runs) - len(failed), failed


def _sweep_runs(left: Leftovers, tracking: Tracking) -> list[str]:
    """The stored run ids and every active child of the parent run, each once, children before the parent."""
    children: list[str] = []
    if left.experiment_id and left.parent_run_id:
        try:
            children = tracking.child_runs(left.experiment_id, left.parent_run_id)
        except Exception:  # noqa: BLE001 - MLflow unreachable: the stored ids are tried (and reported) below
            log.exception("the children of MLflow run %s could not be listed", left.parent_run_id)
    return [r for r in dict.fromkeys([*left.run_ids, *children, left.parent_run_id or ""]) if r]
