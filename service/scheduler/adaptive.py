"""The controller's Optuna driver: adaptive sweeps' studies and the record of finished lr searches.

Every Optuna call of the scheduler lives here (`up` also checks Optuna's schema, service.stack).
Studies are kept in the controller's database (sweeps.adaptive); Optuna writes through its own
connection, so no store transaction is open while it does (on SQLite the two would wait for each
other's write lock).
"""

from __future__ import annotations

import optuna

from service.lifecycle import TRIAL_TERMINAL, SweepStatus, TrialStatus
from service.scheduler.context import Context
from service.scheduler.jobs import tuned_lrs
from service.store import Sweep, Trial
from sweeps import adaptive
from sweeps.spec import SweepSpec
from workers.entry import frozen_trials


class AdaptiveDriver:
    """Asks and tells the study of each running adaptive sweep; one Optuna storage, opened on first use."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._storage: optuna.storages.RDBStorage | None = None
        self._studies: dict[str, optuna.Study] = {}

    def storage(self) -> optuna.storages.RDBStorage:
        """Optuna's tables in the controller's database."""
        if self._storage is None:
            url = self.ctx.settings.resolved_database_url
            kwargs = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {"pool_pre_ping": True}
            self._storage = optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        return self._storage

    def study(self, sweep_id: str, spec: SweepSpec) -> optuna.Study:
        if sweep_id not in self._studies:
            self._studies[sweep_id] = adaptive.open_study(spec, self.storage(), f"groupscale-{sweep_id}")
        return self._studies[sweep_id]

    def advance(self) -> None:
        """For each running adaptive sweep: tell the study the trials that ended, then ask it for new
        (G, B, seed) points up to ``adaptive.parallel`` in flight, until its G* interval is narrow
        enough or max_trials were asked. Each decision goes onto the MLflow parent run; the current
        fit onto the sweep (its progress shows the interval). Store rows and study trials are matched
        by number (Trial.position), so a restart at any point neither loses nor repeats a trial.
        """
        store, tracking = self.ctx.store, self.ctx.tracking
        for sweep_id, spec, rows, parent in self._running():
            study = self.study(sweep_id, spec)
            new = []
            for point in adaptive.running_points(study):
                if point.number not in rows:  # asked, but the controller died before the row was stored
                    new.append(point)
                elif rows[point.number][0] in TRIAL_TERMINAL:
                    adaptive.tell(study, point.number, rows[point.number][1])
            st = adaptive.state(study, spec)
            in_flight = len(new) + sum(status not in TRIAL_TERMINAL for status, _ in rows.values())
            decisions = []
            while not st.done and in_flight < spec.adaptive.parallel:
                point = adaptive.ask(study, spec)
                new.append(point)
                decisions.append((point, st))
                in_flight += 1
                st = adaptive.state(study, spec)
            with store.session() as s:
                sweep = s.get(Sweep, sweep_id)
                s.add_all(Trial.planned(sweep_id, p.number, p) for p in new)
                if st.fit is not None:
                    sweep.fit = st.fit.model_dump(mode="json")
            for point, before in decisions:
                if tracking and parent:
                    self.ctx.safe(tracking.log_decision, parent, point, before.fit, before.reason)

    def _running(self) -> list[tuple[str, SweepSpec, dict[int, tuple[TrialStatus, float | None]], str | None]]:
        """Each running adaptive sweep whose lr tuning has ended: (id, spec, its trials by position as (status, the
        law's metric when it succeeded), its MLflow parent run)."""
        todo = []
        with self.ctx.store.read() as s:
            for sweep in self.ctx.store.sweeps_with_status(s, SweepStatus.RUNNING):
                spec = self.ctx.store.spec(sweep)
                if spec.mode == "adaptive" and tuned_lrs(sweep) is not None:
                    metric = spec.measure.metric
                    rows = {
                        t.position: (t.status, t.metrics.get(metric) if t.status == TrialStatus.SUCCEEDED else None)
                        for t in sweep.trials
                    }
                    todo.append((sweep.id, spec, rows, sweep.mlflow_parent_run_id))
        return todo

    def done(self, sweep: Sweep) -> bool:
        """An adaptive sweep ends once its study says stop and every trial it asked for was told (a grid
        sweep: always). Reads only, so a store transaction may be open."""
        spec = self.ctx.store.spec(sweep)
        if spec.mode != "adaptive":
            return True
        study = self.study(sweep.id, spec)
        running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        return not running and adaptive.state(study, spec).done

    def record_tuning(self, sweep_id: str, group_size: int, samples_per_step: int, result: dict) -> None:
        """Copy a finished lr search into a study of the controller's database, so optuna-dashboard shows it."""
        name = f"groupscale-{sweep_id}-tune_lr-G{group_size}-B{samples_per_step}"
        study = optuna.create_study(storage=self.storage(), study_name=name, direction=result["direction"], load_if_exists=True)
        if not study.trials:
            study.add_trials(frozen_trials(result))
