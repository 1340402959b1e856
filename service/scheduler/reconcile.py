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
    Work); the others (their worker is known dead or gone) go back to pending and resume from their
    checkpoints into the same MLflow run. Workers of this store's trials that have ended are killed
    (others on a shared cluster are left alone); runs made but never stored are adopted
    (TrialJob.adopt_runs); probes and lr tunings that were running run again.

    The cluster is asked first (backend.trial_names waits until every worker answers or is known dead),
    the store is written then, and MLflow is called last: no network call inside a transaction.
    """
    backend, tracking = ctx.backend, ctx.tracking
    named = {n.removeprefix("trial-") for n in backend.trial_names()}
    attach: list[tuple[str, str, Any]] = []  # (trial, sweep, its spec)
    tunings: list[tuple[str | None, int, int]] = []  # (parent run, G, B) of lr searches that run again
    with ctx.store.session() as s:
        ended = list(s.scalars(select(Trial.id).where(Trial.id.in_(named), Trial.status.in_(TRIAL_TERMINAL))))
        for trial in s.scalars(select(Trial).where(Trial.status == TrialStatus.RUNNING)):
            if trial.id in named:
                attach.append((trial.id, trial.sweep_id, ctx.store.spec(trial.sweep)))
            else:
                transition(s, trial, TrialStatus.PENDING)
        for sweep in ctx.store.sweeps_with_status(s, SweepStatus.FITTING):
            transition(s, sweep, SweepStatus.RUNNING)
        for probe in s.scalars(select(Probe).where(Probe.status == ProbeStatus.RUNNING)):
            transition(s, probe, ProbeStatus.QUEUED)
        for tuning in s.scalars(select(LrTuning).where(LrTuning.status == TuningStatus.RUNNING)):
            transition(s, tuning, TuningStatus.PENDING)  # a tuning task is short and not detached: it runs again
            tunings.append((tuning.sweep.mlflow_parent_run_id, tuning.group_size, tuning.samples_per_step))
    for trial_id in ended:  # collected, but the previous controller died before killing its worker
        backend.kill_trial(trial_actor_name(trial_id))
    inflight: dict[Any, Work] = {}
    for trial_id, sweep_id, spec in attach:
        handle = backend.attach_trial(trial_actor_name(trial_id))
        if handle is None:  # its worker died since trial_names answered
            with ctx.store.session() as s:
                trial = s.get(Trial, trial_id)
                if trial.status == TrialStatus.RUNNING:
                    transition(s, trial, TrialStatus.PENDING)
            continue
        res = spec.resources
        inflight[handle] = Work("trial", trial_id, sweep_id, res.cpus_per_trial, res.gpus_per_trial, res.num_processes)
        log.info("re-attached to trial %s", trial_id)
    trials.adopt_runs(ctx)
    for parent, g, b in tunings:
        if tracking and parent:
            ctx.safe(tracking.kill_tuning_runs, parent, g, b)
    return inflight
