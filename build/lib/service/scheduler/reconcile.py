"""After a controller restart: re-attach to the trials still alive on the cluster, send the rest back to pending."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select

from service.lifecycle import TRIAL_TERMINAL, ProbeStatus, SweepStatus, TrialStatus, TuningStatus, transition
from service.scheduler.context import Context, Work
from service.scheduler.jobs import TrialJob, trial_actor_name
from service.store import LrTuning, Probe, Trial

log = logging.getLogger("groupscale.scheduler")


def reconcile(ctx: Context, trials: TrialJob) -> dict[Any, Work]:
    """Re-attach to the trials still alive on the cluster and return them as work in flight (handle ->
    Work); the others (their actor is gone or dead) go back to pending and resume from their
    checkpoints into the same MLflow run. Actors of this store's trials that have ended are killed
    (others on a shared cluster are left alone); runs made but never stored are adopted
    (TrialJob.adopt_runs); probes and lr tunings that were running run again."""
    backend, tracking = ctx.backend, ctx.tracking
    inflight: dict[Any, Work] = {}
    with ctx.store.session() as s:
        named = {n.removeprefix("trial-") for n in backend.trial_names()}
        ended = select(Trial.id).where(Trial.id.in_(named), Trial.status.in_(TRIAL_TERMINAL))
        for trial_id in s.scalars(ended):  # collected, but the previous controller died before killing it
            backend.kill_trial(trial_actor_name(trial_id))
        for trial in s.scalars(select(Trial).where(Trial.status == TrialStatus.RUNNING)):
            handle = backend.attach_trial(trial_actor_name(trial.id)) if trial.id in named else None
            if handle is None:
                transition(s, trial, TrialStatus.PENDING)
                continue
            res = ctx.store.spec(trial.sweep).resources
            inflight[handle] = Work("trial", trial.id, trial.sweep_id, res.cpus_per_trial, res.gpus_per_trial)
            log.info("re-attached to trial %s", trial.id)
        for sweep in ctx.store.sweeps_with_status(s, SweepStatus.FITTING):
            transition(s, sweep, SweepStatus.RUNNING)
        for sweep in ctx.store.sweeps_with_status(s, SweepStatus.RUNNING):
            trials.adopt_runs(ctx, s, sweep)
        for probe in s.scalars(select(Probe).where(Probe.status == ProbeStatus.RUNNING)):
            transition(s, probe, ProbeStatus.QUEUED)
        for tuning in s.scalars(select(LrTuning).where(LrTuning.status == TuningStatus.RUNNING)):
            transition(s, tuning, TuningStatus.PENDING)  # a tuning task is short and not detached: it runs again
            if tracking and tuning.sweep.mlflow_parent_run_id:
                ctx.safe(tracking.kill_tuning_runs, tuning.sweep.mlflow_parent_run_id, tuning.group_size, tuning.samples_per_step)
    return inflight
