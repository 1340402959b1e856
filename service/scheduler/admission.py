"""Admission: queued sweeps start (their MLflow parent run, their lr tunings and grid trials), and a running sweep whose
failed trials spent its failure budget ends failed."""

from __future__ import annotations

import logging

from sqlalchemy import func, select

from service import lifecycle
from service.lifecycle import SweepStatus, TrialStatus, transition
from service.scheduler.context import Context
from service.scheduler.faults import Faults
from service.store import LrTuning, Sweep, Trial
from sweeps.planner import plan_trials

log = logging.getLogger("groupscale.scheduler")


class Admission:
    """What lets sweeps in and turns them away once too many trials failed."""

    def __init__(self, ctx: Context, faults: Faults) -> None:
        self.ctx, self.faults = ctx, faults

    def admit(self) -> None:
        """Queued sweeps start: their MLflow parent run (made outside any transaction), their lr tunings and
        (grid) trials are created."""
        tracking, store = self.ctx.tracking, self.ctx.store
        with store.read() as s:
            queued = [
                (w.id, store.spec(w), w.task_name, w.mlflow_parent_run_id)
                for w in store.sweeps_with_status(s, SweepStatus.QUEUED)
            ]
        for sweep_id, spec, key, parent in queued:
            runs = None
            if tracking and not parent:
                try:
                    runs = tracking.start_sweep(sweep_id, spec, key)
                except Exception as e:  # noqa: BLE001 - the sweep stays queued, saying why; the rest of the tick goes on
                    self._waits(sweep_id, e)
                    continue
            self.faults.clear(f"admitting sweep {sweep_id}")
            with store.session() as s:
                sweep = s.get(Sweep, sweep_id)
                if runs:  # stored even when a cancel came first: close_cancelled ends the run
                    sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id = runs
                if sweep.status != SweepStatus.QUEUED:
                    continue
                sweep.error = None  # why it waited, if it did
                if spec.tune_lr is not None and not sweep.lr_tunings:
                    for b in spec.samples_per_step:
                        s.add_all(LrTuning(sweep_id=sweep.id, group_size=g, samples_per_step=b) for g in spec.group_sizes)
                if spec.mode == "grid" and not sweep.trials:  # adaptive sweeps get theirs from the study
                    s.add_all(Trial.planned(sweep.id, i, p) for i, p in enumerate(plan_trials(spec)))
                transition(s, sweep, SweepStatus.RUNNING)

    def _waits(self, sweep_id: str, error: Exception) -> None:
        """A queued sweep's MLflow parent run could not be made: counted, and said in the sweep's ``error``."""
        fault = self.faults.record(f"admitting sweep {sweep_id}", error)
        with self.ctx.store.session() as s:
            sweep = s.get(Sweep, sweep_id)
            if sweep is not None and sweep.status == SweepStatus.QUEUED:
                sweep.error = f"queued: its MLflow parent run could not be made ({fault.count} tries): {fault.message}"

    def fail_over_budget(self) -> None:
        """A running sweep with more failed trials than its failure budget (spec.max_failed_trials) ends failed,
        saying how many failed and their first causes; its other trials are cancelled (the running ones stopped)."""
        store = self.ctx.store
        with store.read() as s:  # one count per tick; a write transaction only for a sweep past its budget
            counts = s.execute(
                select(Sweep, func.count(Trial.id))
                .join(Trial)
                .where(Sweep.status == SweepStatus.RUNNING, Trial.status == TrialStatus.FAILED)
                .group_by(Sweep.id)
            ).all()
            over = [sweep.id for sweep, failed in counts if failed > store.spec(sweep).failure_budget]
        for sweep_id in over:
            with store.session() as s:
                sweep = s.get(Sweep, sweep_id)
                budget = store.spec(sweep).failure_budget
                failed = [t for t in sweep.trials if t.status == TrialStatus.FAILED]
                left = sum(t.status not in lifecycle.TRIAL_TERMINAL for t in sweep.trials)  # what fail_sweep cancels
                causes = "; ".join(list(dict.fromkeys(t.reason or "no reason given" for t in failed))[:3])
                cancelled = f"; the {left} left {'were' if left > 1 else 'was'} cancelled" if left else ""  # none left: unsaid
                error = f"{_trials(len(failed))} failed, more than max_failed_trials={budget}{cancelled}. First causes: {causes}"
                if lifecycle.fail_sweep(s, sweep, error[:4000]):
                    log.warning("sweep %s failed: %s", sweep.id, error)


def _trials(n: int) -> str:
    """``n`` trials in words: "1 trial", "3 trials"."""
    return f"{n} trial{'s' * (n != 1)}"
