"""Runs sweeps on Ray: every Ray call of the controller lives here.

Execution shape (see README "How a sweep runs"): a scheduler thread in the controller admits
queued sweeps, launches each trial as a detached, named Ray actor (workers.entry.TrialRunner) with
the spec's per-trial CPU/GPU requests (no more at once than the cluster's free resources, so a
trial marked running is running), collects results, and fits the law when a sweep's trials have
all ended. Trials outlive the controller process: on a cluster of its own (RAY_ADDRESS) a killed
or restarted controller re-attaches to the actors still running (by name) and collects what they
finished meanwhile. A trial whose actor is gone goes back to pending and resumes from its
checkpoint, logging into the same MLflow run, so each trial has exactly one run.
A worker that dies is restarted by Ray (actor restarts, at most GROUPSCALE_TRIAL_RETRIES) and
resumes from the trial's last checkpoint.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import optuna
import ray
from sqlalchemy import select

from service.results import fit_from_trials
from service.settings import Settings
from service.store import TRIAL_TERMINAL, LrTuning, Probe, Store, Sweep, Trial
from service.tracking import Tracking
from sweeps import adaptive
from sweeps.finite import finite_or_none
from sweeps.planner import TrialPlan, plan_trials
from sweeps.spec import SweepSpec
from workers.entry import TrialRunner, run_probe_task, run_tune_lr
from workers.trainer import TrialConfig
from workers.tune_lr import frozen_trials

log = logging.getLogger("groupscale.scheduler")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def failure_reason(e: Exception) -> str:
    """One line for users: the worker's own exception (not Ray's wrapper or the traceback).

    The full traceback goes to the controller's log.
    """
    log.warning("task failed", exc_info=e)
    cause = getattr(e, "cause", None) or e
    first = (_ANSI.sub("", str(cause)).strip().splitlines() or [""])[0]
    return f"{type(cause).__name__}: {first}"[:1000]


@dataclass(frozen=True)
class Work:
    """A Ray task in flight: a trial or a probe, with the resources it holds."""

    kind: str  # "trial" | "probe" | "tune" (an LrTuning)
    id: str
    cpus: float
    gpus: float
    actor: Any = None  # a trial's TrialRunner actor handle


NAMESPACE = "groupscale"  # named detached actors are found again by a restarted controller in it


def trial_actor_name(trial_id: str) -> str:
    return f"trial-{trial_id}"


def tuned_lrs(sweep: Sweep) -> dict[tuple[int, int], float] | None:
    """The tuned lr per (G, B) of a sweep, or None while its tuning phase runs ({} without tune_lr).
    A (G, B) whose search found nothing keeps the spec's lr."""
    if any(t.status in ("pending", "running") for t in sweep.lr_tunings):
        return None
    return {(t.group_size, t.samples_per_step): t.best_lr for t in sweep.lr_tunings if t.best_lr is not None}


def connect_ray(settings: Settings) -> bool:
    """Join the cluster at RAY_ADDRESS, or start a local head on loopback. Returns True if local.

    Call it from the main thread before the web server installs its signal handlers: ray.init
    replaces the process's SIGTERM handler, and the server's must win so that SIGTERM shuts the
    stack down cleanly.
    """
    if settings.ray_address:
        ray.init(address=settings.ray_address, namespace=NAMESPACE, log_to_driver=False)
        return False
    # address="local": always a new head, never a cluster that `ray start` left on this machine.
    ray.init(address="local", num_cpus=settings.ray_num_cpus, namespace=NAMESPACE, include_dashboard=False,
             log_to_driver=False, _node_ip_address="127.0.0.1")  # fmt: skip
    return True


def disconnect_ray() -> None:
    if ray.is_initialized():
        ray.shutdown()


class Scheduler:
    """Owns the Ray connection and the scheduling thread."""

    def __init__(self, store: Store, settings: Settings, tracking: Tracking | None) -> None:
        self.store, self.settings, self.tracking = store, settings, tracking
        self._inflight: dict[ray.ObjectRef, Work] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._connected = False  # this object called ray.init (so it calls ray.shutdown)
        self._resources: dict[str, float] = {}
        self._resources_at = 0.0
        self._optuna: optuna.storages.RDBStorage | None = None
        self._studies: dict[str, optuna.Study] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if not ray.is_initialized():  # `groupscale up` connects before the web server starts
            connect_ray(self.settings)
            self._connected = True
        self._reconcile()
        self._thread = threading.Thread(target=self._loop, name="groupscale-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop scheduling. On a Ray cluster of its own (RAY_ADDRESS), running trials go on and the next
        controller re-attaches to them. With the local head, which stops with the controller, they go
        back to pending (the next start resumes them from their checkpoints) and their MLflow runs end
        KILLED rather than staying RUNNING."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.settings.ray_address:  # a cluster of its own: the trials go on without us
            self._inflight.clear()
            return
        running = [w.id for w in self._inflight.values() if w.kind == "trial"]
        with self.store.session() as s:
            for trial in s.scalars(select(Trial).where(Trial.id.in_(running))):
                if trial.mlflow_run_id and self.tracking:
                    self._safe(self.tracking.kill, trial.mlflow_run_id)
                trial.status, trial.mlflow_run_id = "pending", None
        self._inflight.clear()
        if self._connected:
            disconnect_ray()

    def cluster_resources(self) -> dict[str, float]:
        """Total cluster resources (cached for 5 s)."""
        if time.monotonic() - self._resources_at > 5.0 or not self._resources:
            self._resources = dict(ray.cluster_resources()) if ray.is_initialized() else {}
            self._resources_at = time.monotonic()
        return self._resources

    def healthy(self) -> bool:
        return ray.is_initialized() and bool(self.cluster_resources().get("CPU"))

    # -- the loop ------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - the loop must survive any one failure; it is logged
                log.exception("scheduler tick failed")
                time.sleep(self.settings.poll_interval_s)

    def _tick(self) -> None:
        self._admit()
        self._cancel_stopped()
        self._launch_probes()
        self._launch_tunings()
        self._advance_adaptive()
        self._launch()
        if self._inflight:
            ready, _ = ray.wait(list(self._inflight), num_returns=len(self._inflight), timeout=self.settings.poll_interval_s)
            for ref in ready:
                self._collect(ref)
        else:
            time.sleep(self.settings.poll_interval_s)
        self._finish()

    def _reconcile(self) -> None:
        """After a restart: re-attach to the trials still running on Ray; the others (their actor is
        gone) go back to pending and resume from their checkpoints into the same MLflow run. Actors
        of this store's trials that have ended are killed (others on a shared cluster are left alone)."""
        with self.store.session() as s:
            running = {t.id: t for t in s.scalars(select(Trial).where(Trial.status == "running"))}
            named = {n.removeprefix("trial-") for n in ray.util.list_named_actors() if n.startswith("trial-")}
            ended = select(Trial.id).where(Trial.id.in_(named), Trial.status.in_(TRIAL_TERMINAL))
            for trial_id in s.scalars(ended):  # collected, but the previous controller died before killing it
                self._kill_actor(trial_actor_name(trial_id))
            for trial in running.values():
                try:
                    actor = ray.get_actor(trial_actor_name(trial.id))
                except ValueError:  # gone (the cluster restarted, or restarts ran out): resume it
                    trial.status = "pending"
                    continue
                res = SweepSpec.model_validate(trial.sweep.spec).resources
                self._inflight[actor.wait.remote()] = Work("trial", trial.id, res.cpus_per_trial, res.gpus_per_trial, actor)
                log.info("re-attached to trial %s", trial.id)
            for sweep in self.store.sweeps_with_status(s, "fitting"):
                sweep.status = "running"
            for probe in s.scalars(select(Probe).where(Probe.status == "running")):
                probe.status = "queued"
            for tuning in s.scalars(select(LrTuning).where(LrTuning.status == "running")):
                tuning.status = "pending"  # a tuning task is short and not detached: it runs again
                if self.tracking and tuning.sweep.mlflow_parent_run_id:
                    self._safe(self.tracking.kill_tuning_runs, tuning.sweep.mlflow_parent_run_id, tuning.group_size,
                               tuning.samples_per_step)  # fmt: skip

    def _admit(self) -> None:
        with self.store.session() as s:
            for sweep in self.store.sweeps_with_status(s, "queued"):
                spec = SweepSpec.model_validate(sweep.spec)
                if self.tracking and not sweep.mlflow_parent_run_id:
                    started = self.tracking.start_sweep(sweep.id, spec, sweep.task_name)
                    sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id = started
                if spec.tune_lr is not None and not sweep.lr_tunings:
                    for b in spec.samples_per_step:
                        s.add_all(LrTuning(sweep_id=sweep.id, group_size=g, samples_per_step=b) for g in spec.group_sizes)
                if spec.mode == "grid" and not sweep.trials:  # adaptive sweeps get theirs from the study
                    for i, plan in enumerate(plan_trials(spec)):
                        s.add(
                            Trial(
                                sweep_id=sweep.id,
                                position=i,
                                group_size=plan.group_size,
                                samples_per_step=plan.samples_per_step,
                                seed=plan.seed,
                            )
                        )
                sweep.status = "running"

    def _free(self) -> tuple[float, float]:
        total = self.cluster_resources()
        used_cpu = sum(w.cpus for w in self._inflight.values())
        used_gpu = sum(w.gpus for w in self._inflight.values())
        return total.get("CPU", 0.0) - used_cpu, total.get("GPU", 0.0) - used_gpu

    def _has_slot(self, cpus: float, gpus: float) -> bool:
        """The cluster has cpus and gpus free; with nothing in flight, always (Ray queues it anyway)."""
        free_cpu, free_gpu = self._free()
        return not self._inflight or (cpus <= free_cpu + 1e-9 and gpus <= free_gpu + 1e-9)

    def _launch(self) -> None:
        running = {w.id for w in self._inflight.values()}
        with self.store.session() as s:
            rows = s.execute(
                select(Trial, Sweep)
                .join(Sweep)
                .where(Sweep.status == "running", Trial.status == "pending")
                .order_by(Sweep.created_at, Trial.position)
            ).all()
            specs: dict[str, SweepSpec] = {}  # validated once per sweep per tick, not once per trial
            tuned: dict[str, dict[tuple[int, int], float] | None] = {}  # None: tuning not finished
            for trial, sweep in rows:
                if trial.id in running:
                    continue
                if sweep.id not in specs:
                    specs[sweep.id] = SweepSpec.model_validate(sweep.spec)
                    tuned[sweep.id] = tuned_lrs(sweep)
                spec, lrs = specs[sweep.id], tuned[sweep.id]
                if lrs is None:  # the sweep proper starts once its learning rates are tuned
                    continue
                cpus, gpus = spec.resources.cpus_per_trial, spec.resources.gpus_per_trial
                if not self._has_slot(cpus, gpus):
                    break
                plan = TrialPlan(trial.group_size, trial.samples_per_step, trial.seed)
                ckpt = self._checkpoint_dir(trial.id)  # a rerun resumes from it
                config = asdict(TrialConfig.from_spec(spec, plan, self.settings.model_cache_dir, ckpt))
                config["lr"] = lrs.get((trial.group_size, trial.samples_per_step), config["lr"])
                if self.tracking and sweep.mlflow_parent_run_id and not trial.mlflow_run_id:  # a resume keeps its run
                    try:
                        trial.mlflow_run_id = self.tracking.start_trial(
                            sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id, spec, trial.id,
                            trial.group_size, trial.samples_per_step, trial.seed, config["lr"],
                        )  # fmt: skip
                    except Exception:  # noqa: BLE001 - keep what was launched; this trial waits for the next tick
                        log.exception("creating the MLflow run of trial %s failed; retrying later", trial.id)
                        break
                # Detached: the trial outlives this process. A dead worker (not an exception in the trial)
                # is restarted by Ray at most trial_retries times, resuming from the last checkpoint; the
                # pending wait() is retried on the restarted actor (max_task_retries=-1, bounded by restarts).
                runner = ray.remote(TrialRunner).options(
                    name=trial_actor_name(trial.id), lifetime="detached", get_if_exists=True, num_cpus=cpus, num_gpus=gpus,
                    max_restarts=self.settings.trial_retries, max_task_retries=-1, max_concurrency=4,
                )  # fmt: skip
                actor = runner.remote(config, self.tracking.uri if self.tracking else None, trial.mlflow_run_id,
                                      trial_actor_name(trial.id))  # fmt: skip
                self._inflight[actor.wait.remote()] = Work("trial", trial.id, cpus, gpus, actor)
                trial.status, trial.attempts = "running", trial.attempts + 1

    def _launch_probes(self) -> None:
        with self.store.session() as s:
            for probe in s.scalars(select(Probe).where(Probe.status == "queued").order_by(Probe.created_at)):
                spec = SweepSpec.model_validate(probe.spec)
                plan = plan_trials(spec)[0]  # task, model and sampling settings; G and B are unused
                config = asdict(TrialConfig.from_spec(spec, plan, self.settings.model_cache_dir))
                cpus, gpus = spec.resources.cpus_per_trial, spec.resources.gpus_per_trial
                task = ray.remote(run_probe_task).options(num_cpus=cpus, num_gpus=gpus, max_retries=0)
                self._inflight[task.remote(config, spec.probe.model_dump())] = Work("probe", probe.id, cpus, gpus)
                probe.status = "running"

    def _study(self, sweep_id: str, spec: SweepSpec) -> optuna.Study:
        """The adaptive sweep's Optuna study, kept in the controller's database (sweeps.adaptive)."""
        if sweep_id not in self._studies:
            self._studies[sweep_id] = adaptive.open_study(spec, self._optuna_storage(), f"groupscale-{sweep_id}")
        return self._studies[sweep_id]

    def _advance_adaptive(self) -> None:
        """For each running adaptive sweep: tell the study the trials that ended, then ask it for new
        (G, B, seed) points up to ``adaptive.parallel`` in flight, until its G* interval is narrow
        enough or max_trials were asked. Each decision goes onto the MLflow parent run; the current
        fit onto the sweep (its progress shows the interval). Store rows and study trials are matched
        by number (Trial.position), so a restart at any point neither loses nor repeats a trial.

        Optuna writes through its own connection, so no store transaction is open meanwhile (on
        SQLite the two would wait for each other's write lock).
        """
        with self.store.session() as s:
            todo = []
            for sweep in self.store.sweeps_with_status(s, "running"):
                spec = SweepSpec.model_validate(sweep.spec)
                if spec.mode == "adaptive" and tuned_lrs(sweep) is not None:
                    metric = spec.measure.metric
                    rows = {
                        t.position: (t.status, t.metrics.get(metric) if t.status == "succeeded" else None) for t in sweep.trials
                    }
                    todo.append((sweep.id, spec, rows, sweep.mlflow_parent_run_id))
        for sweep_id, spec, rows, parent in todo:
            study = self._study(sweep_id, spec)
            new = []
            for point in adaptive.running_points(study):
                if point.number not in rows:  # asked, but the controller died before the row was stored
                    new.append(point)
                elif rows[point.number][0] in TRIAL_TERMINAL:
                    adaptive.tell(study, point.number, rows[point.number][1])
            st = adaptive.state(study, spec)
            in_flight = len(new) + sum(status in ("pending", "running") for status, _ in rows.values())
            decisions = []
            while not st.done and in_flight < spec.adaptive.parallel:
                point = adaptive.ask(study, spec)
                new.append(point)
                decisions.append((point, st))
                in_flight += 1
                st = adaptive.state(study, spec)
            with self.store.session() as s:
                sweep = s.get(Sweep, sweep_id)
                s.add_all(Trial(sweep_id=sweep_id, position=p.number, group_size=p.group_size,
                                samples_per_step=p.samples_per_step, seed=p.seed) for p in new)  # fmt: skip
                if st.fit is not None:
                    sweep.fit = st.fit.model_dump(mode="json")
            for point, before in decisions:
                if self.tracking and parent:
                    self._safe(self.tracking.log_decision, parent, point.number, point.group_size, point.samples_per_step,
                               before.fit, before.reason)  # fmt: skip

    def _adaptive_done(self, sweep: Sweep) -> bool:
        """An adaptive sweep ends once its study says stop and every trial it asked for was told."""
        spec = SweepSpec.model_validate(sweep.spec)
        if spec.mode != "adaptive":
            return True
        study = self._study(sweep.id, spec)
        running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        return not running and adaptive.state(study, spec).done  # reads only: a store transaction is open

    def _launch_tunings(self) -> None:
        """Start the learning-rate search (workers.tune_lr) of every pending (G, B) of a running sweep."""
        with self.store.session() as s:
            rows = s.execute(
                select(LrTuning, Sweep).join(Sweep).where(Sweep.status == "running", LrTuning.status == "pending")
                .order_by(Sweep.created_at, LrTuning.created_at)
            ).all()  # fmt: skip
            for tuning, sweep in rows:
                spec = SweepSpec.model_validate(sweep.spec)
                cpus, gpus = spec.resources.cpus_per_trial, spec.resources.gpus_per_trial
                if not self._has_slot(cpus, gpus):
                    break
                plan = TrialPlan(tuning.group_size, tuning.samples_per_step, spec.seeds[0])
                config = asdict(TrialConfig.from_spec(spec, plan, self.settings.model_cache_dir))
                tune = {**spec.tune_lr.model_dump(), "seed": spec.seeds[0]}
                task = ray.remote(run_tune_lr).options(num_cpus=cpus, num_gpus=gpus, max_retries=self.settings.trial_retries,
                                                       retry_exceptions=False)  # fmt: skip
                uri = self.tracking.uri if self.tracking else None
                ref = task.remote(config, tune, uri, sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id)
                self._inflight[ref] = Work("tune", tuning.id, cpus, gpus)
                tuning.status = "running"

    def _collect_tuning(self, tuning_id: str, ref: ray.ObjectRef) -> None:
        """Store the tuned lr; copy the search into an Optuna study of the controller's database (so
        optuna-dashboard shows it) and the best lr onto the sweep's parent run."""
        try:
            result, error = ray.get(ref), None
        except Exception as e:  # noqa: BLE001 - a failed search leaves the spec's lr
            result, error = None, failure_reason(e)
        with self.store.session() as s:
            tuning = s.get(LrTuning, tuning_id)
            if tuning.status == "cancelled":
                return
            tuning.status, tuning.error = ("succeeded", None) if error is None else ("failed", error)
            tuning.result = finite_or_none(result) if result is not None else None
            tuning.best_lr = result.get("best_lr") if result else None
            sweep_id, g, b, best = tuning.sweep_id, tuning.group_size, tuning.samples_per_step, tuning.best_lr
            parent = tuning.sweep.mlflow_parent_run_id
        if result:  # after the store's commit: Optuna writes through its own connection
            study = optuna.create_study(storage=self._optuna_storage(), study_name=f"groupscale-{sweep_id}-tune_lr-G{g}-B{b}",
                                        direction=result["direction"], load_if_exists=True)  # fmt: skip
            if not study.trials:
                study.add_trials(frozen_trials(result))
        if self.tracking and parent and best is not None:
            self._safe(self.tracking.log_values, parent, {f"tune_lr.best_lr.G{g}.B{b}": best})

    def _optuna_storage(self) -> optuna.storages.RDBStorage:
        """Optuna's tables in the controller's database (one storage, made on first use)."""
        if self._optuna is None:
            url = self.settings.resolved_database_url
            kwargs = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {"pool_pre_ping": True}
            self._optuna = optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        return self._optuna

    def _collect_probe(self, probe_id: str, ref: ray.ObjectRef) -> None:
        try:
            result, error = ray.get(ref), None
        except Exception as e:  # noqa: BLE001 - a failed probe is reported, not raised
            result, error = None, failure_reason(e)
        with self.store.session() as s:
            probe = s.get(Probe, probe_id)
            probe.status, probe.error = ("succeeded", None) if error is None else ("failed", error)
            probe.result = finite_or_none(result) if result is not None else None
            if self.tracking and result is not None:
                try:
                    probe.mlflow_run_id = self.tracking.log_probe(probe.id, SweepSpec.model_validate(probe.spec), result)
                except Exception:  # noqa: BLE001 - the result is stored either way; the failure is logged
                    log.exception("logging probe %s to MLflow failed", probe_id)

    def _collect(self, ref: ray.ObjectRef) -> None:
        work = self._inflight.pop(ref)
        if work.kind == "probe":
            return self._collect_probe(work.id, ref)
        if work.kind == "tune":
            return self._collect_tuning(work.id, ref)
        trial_id = work.id
        try:
            result: dict[str, Any] = ray.get(ref)
        except Exception as e:  # noqa: BLE001 - a failed trial is data, not a controller crash
            result = {"status": "failed", "metrics": {}, "reason": failure_reason(e)}
        self._kill_actor(trial_actor_name(trial_id))  # detached: it would hold its CPUs/GPUs until killed
        with self.store.session() as s:
            trial = s.get(Trial, trial_id)
            if trial.status == "cancelled":  # cancelled while it was finishing
                result["status"] = "cancelled"
            trial.status, trial.reason = result["status"], result.get("reason")
            trial.metrics = finite_or_none(result.get("metrics") or {})
            trial.seconds = result.get("seconds")
            run_id = trial.mlflow_run_id
        if run_id and self.tracking:
            self._safe(self.tracking.end_trial, run_id, result["status"], result.get("reason"))
        shutil.rmtree(self._checkpoint_dir(trial_id), ignore_errors=True)  # ended: nothing left to resume

    def _checkpoint_dir(self, trial_id: str) -> Path:
        return self.settings.data_dir.resolve() / "checkpoints" / trial_id

    def _cancel_stopped(self) -> None:
        with self.store.session() as s:
            for sweep in self.store.sweeps_with_status(s, "cancelled"):
                if sweep.mlflow_closed or any(t.status == "running" for t in sweep.trials):
                    continue
                if self.tracking and sweep.mlflow_parent_run_id:
                    self._safe(self.tracking.end_sweep, sweep.mlflow_parent_run_id, None, sweep.name, "KILLED")
                sweep.mlflow_closed = True
        if not self._inflight:
            return
        with self.store.session() as s:
            ids = {w.id for w in self._inflight.values() if w.kind == "trial"}
            doomed = set(s.scalars(select(Trial.id).join(Sweep).where(Trial.id.in_(ids), Sweep.status == "cancelled")))
            for trial in s.scalars(select(Trial).where(Trial.id.in_(doomed))):
                trial.status = "cancelled"
            ids = {w.id for w in self._inflight.values() if w.kind == "tune"}
            tunings = s.scalars(select(LrTuning).join(Sweep).where(LrTuning.id.in_(ids), Sweep.status == "cancelled"))
            for tuning in tunings:
                tuning.status = "cancelled"
                doomed.add(tuning.id)
        for ref, work in list(self._inflight.items()):
            if work.id in doomed and work.kind == "trial":
                self._kill_actor(trial_actor_name(work.id))
            elif work.id in doomed:
                ray.cancel(ref, force=True)

    def _finish(self) -> None:
        with self.store.session() as s:
            for sweep in self.store.sweeps_with_status(s, "running"):
                if not sweep.trials or any(t.status not in TRIAL_TERMINAL for t in sweep.trials):
                    continue
                if not self._adaptive_done(sweep):
                    continue
                sweep.status = "fitting"
        with self.store.session() as s:
            for sweep in self.store.sweeps_with_status(s, "fitting"):
                self._fit_and_close(sweep)

    def _fit_and_close(self, sweep: Sweep) -> None:
        usable = [t for t in sweep.trials if t.status in ("succeeded", "no_signal")]
        if not usable:
            reasons = sorted({t.reason or t.status for t in sweep.trials})
            sweep.status, sweep.error = "failed", "no trial finished: " + "; ".join(reasons)[:2000]
            if self.tracking and sweep.mlflow_parent_run_id:
                self._safe(self.tracking.end_sweep, sweep.mlflow_parent_run_id, None, sweep.name, "FAILED")
            sweep.mlflow_closed = True
            return
        fit = fit_from_trials(sweep.trials, SweepSpec.model_validate(sweep.spec))
        sweep.fit = fit.model_dump(mode="json")
        if self.tracking and sweep.mlflow_parent_run_id:
            self._safe(self.tracking.end_sweep, sweep.mlflow_parent_run_id, fit, f"{sweep.name}: {fit.status}")
        sweep.status, sweep.mlflow_closed = "succeeded", True

    @staticmethod
    def _kill_actor(name: str) -> None:
        try:
            ray.kill(ray.get_actor(name), no_restart=True)
        except ValueError:  # already gone
            pass

    @staticmethod
    def _safe(fn, *args) -> None:  # noqa: ANN001
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - MLflow trouble must not stop scheduling; it is logged
            log.exception("MLflow call %s failed", getattr(fn, "__name__", fn))
