"""Collection: work that ended is stored (each job kind's ``collect``), cancelled work is stopped, and sweeps whose
trials have all ended are fitted and closed (their MLflow parent run ends after every child run)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select

from service.lifecycle import TRIAL_TERMINAL, TRIAL_USABLE, TUNING_TERMINAL, SweepStatus, TrialStatus, TuningStatus, transition
from service.results import fit_from_trials, report_about
from service.scheduler.adaptive import AdaptiveDriver
from service.scheduler.context import Context, Outcome, Work
from service.store import LrTuning, Sweep, Trial

log = logging.getLogger("groupscale.scheduler")


class Collection:
    """Ends work in ``inflight`` (handle -> Work, the scheduler's own) through its job kind (``jobs``: kind -> job)."""

    def __init__(self, ctx: Context, jobs: dict[str, Any], inflight: dict[Any, Work], adaptive: AdaptiveDriver) -> None:
        self.ctx, self.jobs, self.inflight, self.adaptive = ctx, jobs, inflight, adaptive
        self._stopping: set[Any] = set()  # handles of cancelled work being stopped

    def collect(self, handle: Any) -> None:
        work = self.inflight.pop(handle)
        stopped = handle in self._stopping
        self._stopping.discard(handle)
        try:
            outcome = Outcome(value=self.ctx.backend.result(handle))
        except Exception as e:  # noqa: BLE001 - failed work is data, not a controller crash
            reason, died = self.ctx.backend.describe(e)
            if not stopped:  # a cancel is not an error: no traceback for work it stopped
                log.warning("%s %s failed", work.kind, work.id, exc_info=e)
            outcome = Outcome(error=reason, died=died)
        self.jobs[work.kind].collect(self.ctx, work, outcome)

    def stop_cancelled(self) -> None:
        """Stop the in-flight work that a cancel ended (lifecycle.cancel_sweep marked it cancelled)."""
        candidates = [(h, w) for h, w in self.inflight.items() if h not in self._stopping and w.kind in ("trial", "tune")]
        if not candidates:
            return
        with self.ctx.store.read() as s:
            trials = {w.id for _, w in candidates if w.kind == "trial"}
            tunings = {w.id for _, w in candidates if w.kind == "tune"}
            cancelled = set(s.scalars(select(Trial.id).where(Trial.id.in_(trials), Trial.status == TrialStatus.CANCELLED)))
            cancelled |= set(
                s.scalars(select(LrTuning.id).where(LrTuning.id.in_(tunings), LrTuning.status == TuningStatus.CANCELLED))
            )
        for handle, work in candidates:
            if work.id in cancelled:
                self._stopping.add(handle)
                self.jobs[work.kind].stop(self.ctx, work, handle)

    def close_cancelled(self) -> None:
        """End the MLflow parent run of each cancelled sweep KILLED (of a sweep whose failure budget was spent, FAILED),
        once none of its work is in flight (so every child run it owns has ended first); child runs a lost worker left
        RUNNING end KILLED too."""
        busy = {w.sweep_id for w in self.inflight.values()}
        tracking, store = self.ctx.tracking, self.ctx.store
        with store.read() as s:
            todo = [
                (w.id, w.name, w.mlflow_parent_run_id, [(t.id, t.mlflow_run_id) for t in w.trials], w.status)
                for w in store.sweeps_with_status(s, SweepStatus.CANCELLED, SweepStatus.FAILED)
                if not w.mlflow_closed and w.id not in busy
            ]
        for sweep_id, name, parent, trials, status in todo:
            self.ctx.drain()  # the child runs' own ends first
            if tracking and parent:
                for trial_id, stored in trials:
                    for run_id in (stored, self.ctx.take_run(trial_id)):  # a run made ahead, too
                        if run_id:
                            self.ctx.safe(tracking.kill, run_id)
                self.ctx.safe(tracking.end_sweep, parent, None, name, "KILLED" if status == SweepStatus.CANCELLED else "FAILED")
            with store.session() as s:
                s.get(Sweep, sweep_id).mlflow_closed = True

    def finish(self) -> None:
        """Sweeps whose trials and tunings have all ended (and, adaptive, whose study says stop) are fitted."""
        with self.ctx.store.session() as s:
            for sweep in self.ctx.store.sweeps_with_status(s, SweepStatus.RUNNING):
                if not sweep.trials or any(t.status not in TRIAL_TERMINAL for t in sweep.trials):
                    continue
                if any(t.status not in TUNING_TERMINAL for t in sweep.lr_tunings) or not self.adaptive.done(sweep):
                    continue
                transition(s, sweep, SweepStatus.FITTING)
        with self.ctx.store.read() as s:  # the fits are computed in a read transaction: no write waits for them
            fitting = [
                (w.id, w.name, w.mlflow_parent_run_id, self._fit(w), report_about(w))
                for w in self.ctx.store.sweeps_with_status(s, SweepStatus.FITTING)
            ]
        for sweep_id, name, parent, (fit, error), about in fitting:
            self._close(sweep_id, name, parent, fit, error, about)

    def _fit(self, sweep: Sweep) -> tuple[Any, str | None]:
        """(the law fit of a sweep whose trials have all ended, None) or (None, why it failed: no usable trial)."""
        if not any(t.status in TRIAL_USABLE for t in sweep.trials):
            reasons = sorted({t.reason or t.status for t in sweep.trials})
            return None, "no trial finished: " + "; ".join(reasons)[:2000]
        return fit_from_trials(sweep.trials, self.ctx.store.spec(sweep)), None

    def _close(self, sweep_id: str, name: str, parent: str | None, fit: Any, error: str | None, about: dict) -> None:
        """Store a fitted sweep's end; its MLflow parent run ends first (after its children), outside the
        transaction (a cancel that lands meanwhile wins: close_cancelled then ends the run KILLED).
        ``about``: {spec, created, trials} of the sweep (service.results.report_about), for its report."""
        tracking = self.ctx.tracking
        self.ctx.drain()  # the child runs end before their parent
        if tracking and parent:
            if error is None:
                self.ctx.safe(tracking.end_sweep, parent, fit, f"{name}: {fit.status}", "FINISHED", about)
            else:
                self.ctx.safe(tracking.end_sweep, parent, None, name, "FAILED")
        with self.ctx.store.session() as s:
            sweep = s.get(Sweep, sweep_id)
            if error is None:
                closed = transition(s, sweep, SweepStatus.SUCCEEDED, fit=fit.model_dump(mode="json"))
            else:
                closed = transition(s, sweep, SweepStatus.FAILED, error=error)
            if closed:
                sweep.mlflow_closed = True
