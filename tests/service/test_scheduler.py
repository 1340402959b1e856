"""The scheduler's tick against a fake backend (no Ray, no MLflow server): admission, resource limits,
cancel in each state, restart reconciliation, retries, and the race of a cancel with a completion."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from sqlalchemy import update

from service import lifecycle
from service.lifecycle import IllegalTransition, SweepStatus, TrialStatus, TuningStatus
from service.scheduler import Scheduler
from service.scheduler.jobs import trial_actor_name
from service.settings import Settings
from service.store import LrTuning, Probe, Store, Sweep, Trial, outside_transaction
from tests.factories import spec

SPEC = spec(name="unit", task={"name": "bandit"}, model={"preset": "tabular"}, group_sizes=[2, 4, 8], seeds=[0, 1])
RESULT = {"status": "succeeded", "metrics": {"gap": 0.1}, "reason": None, "steps_done": 5, "seconds": 1.0}


class Died(Exception):
    """The fake's stand-in for Ray's RayActorError."""


class Work:
    def __init__(self, kind, name, cpus, gpus, processes=1):
        self.kind, self.name, self.cpus, self.gpus = kind, name, cpus, gpus  # the work's in all
        self.processes = processes
        self.value, self.error, self.ended = None, None, False


class FakeBackend:
    """The Backend protocol in memory; the test ends work with finish / die."""

    def __init__(self, cpus=2.0, gpus=0.0, busy_elsewhere=0.0):
        self.node_list = [{"CPU": cpus, "GPU": gpus}]  # one node holding everything, unless a test splits it
        self.late: dict[str, float] = {}  # trial actor name -> seconds its worker has waited for a node
        self.busy_elsewhere = busy_elsewhere  # another user's work on a shared cluster
        self.work: dict[str, Work] = {}
        self.alive: dict[str, str] = {}  # trial actor name -> handle
        self.cancelled: list[str] = []
        self.released: list[str] = []  # trials whose worker was let go to take the next one
        self.idle: list[list[float]] = []  # warm idle workers: [cpus, gpus, idle since]
        self.new_workers = self.reused = 0
        self.now = 0.0  # the fake's clock, for idle times
        self._ids = itertools.count()

    def connect(self): ...
    def disconnect(self): ...
    def connected(self):
        return True

    @property
    def total(self):
        return {k: sum(n.get(k, 0.0) for n in self.node_list) for k in ("CPU", "GPU")}

    def available_resources(self):
        used = sum(w.cpus for w in self.work.values() if not w.ended and w.kind != "trial")
        used += sum(w.cpus for h, w in self.work.items() if w.kind == "trial" and self.alive.get(w.name) == h)
        held = self.idle_resources()
        return {"CPU": self.total["CPU"] - used - self.busy_elsewhere - held["CPU"], "GPU": self.total["GPU"] - held["GPU"]}

    def nodes(self):
        return [dict(n) for n in self.node_list]

    def unplaced(self):
        return {n: s for n, s in self.late.items() if n in self.alive}

    def start_trial(self, name, args, cpus, gpus, processes=1):
        same = [w for w in self.idle if w[:2] == [cpus, gpus]] if processes == 1 else []
        if same:
            self.idle.remove(same[0])
            self.reused += 1
        else:
            self.new_workers += 1
        handle = f"h{next(self._ids)}"
        self.work[handle] = Work("trial", name, cpus * processes, gpus * processes, processes)
        self.alive[name] = handle
        return handle

    def attach_trial(self, name):
        return self.alive.get(name)

    def trial_names(self):
        return set(self.alive)

    def release_trial(self, name):
        handle = self.alive.pop(name, None)
        self.released.append(name)
        if handle is not None and self.work[handle].processes == 1:  # several: stopped with its placement group
            self.idle.append([self.work[handle].cpus, self.work[handle].gpus, self.now])

    def prewarm(self, n, cpus, gpus):
        self.idle += [[cpus, gpus, self.now] for _ in range(n - len(self.idle))]

    def has_idle(self, cpus, gpus):
        return any(w[:2] == [cpus, gpus] for w in self.idle)

    def evict_idle(self, cpus, gpus):
        freed = [0.0, 0.0]
        for w in sorted(self.idle, key=lambda w: w[2]):
            if freed[0] >= cpus and freed[1] >= gpus:
                return
            self.idle.remove(w)
            freed = [freed[0] + w[0], freed[1] + w[1]]

    def reap_idle(self, max_idle_s):
        self.idle = [w for w in self.idle if self.now - w[2] < max_idle_s]

    def idle_resources(self):
        return {"CPU": sum(w[0] for w in self.idle), "GPU": sum(w[1] for w in self.idle)}

    def pool(self):
        return {"busy": len(self.alive), "idle": len(self.idle), "starting": 0}

    def start_task(self, fn, args, cpus, gpus, retries, report=False):
        handle = f"h{next(self._ids)}"
        self.work[handle] = Work(fn.__name__, None, cpus, gpus)
        self.work[handle].progress = {} if report else None  # what the test lets it report
        return handle

    def progress(self, handles):
        return {h: self.work[h].progress for h in handles if self.work[h].progress}

    def wait(self, handles, timeout_s):
        ready = [h for h in handles if self.work[h].ended]
        for h in handles:  # a kill takes effect a moment later, as on Ray: it shows at the next wait
            if getattr(self.work[h], "dying", False) and not self.work[h].ended:
                self.die(h)
        return ready

    def result(self, handle):
        w = self.work[handle]
        if w.error is not None:
            raise w.error
        return w.value

    def kill_trial(self, name):
        handle = self.alive.pop(name, None)
        if handle and not self.work[handle].ended:
            self.work[handle].dying = True

    def cancel(self, handle):
        self.cancelled.append(handle)
        self.fail(handle, Died("cancelled"))

    def describe(self, e):
        return f"{type(e).__name__}: {e}", isinstance(e, Died)

    # the test's controls
    def running(self, kind="trial"):
        return [h for h, w in self.work.items() if w.kind == kind and not w.ended]

    def finish(self, handle, value=None):
        w = self.work[handle]
        w.value, w.ended = (dict(RESULT) if value is None else value), True

    def fail(self, handle, error):
        w = self.work[handle]
        w.error, w.ended = error, True

    def die(self, handle):
        self.fail(handle, Died("The actor died unexpectedly"))


class FakeTracking:
    """Records the MLflow calls in order (the parent run must end after its children)."""

    uri = "fake://"

    def __init__(self):
        self.calls = []
        self.running = {}  # run id -> (parent run id, trial id)
        self._runs = itertools.count()

    def start_sweep(self, sweep_id, spec, key):
        return "exp", f"parent-{sweep_id}"

    def start_trial(self, exp, parent, spec, trial_id, g, b, seed, lr, key=None):
        self.calls.append(("start_trial", f"run-{trial_id}"))
        self.running[f"run-{trial_id}"] = (parent, trial_id)
        return f"run-{trial_id}"

    def unended_trial_runs(self, exp, parent):
        return {t: run for run, (p, t) in self.running.items() if p == parent}

    def reopen_trial(self, run_id):
        self.calls.append(("reopen_trial", run_id))

    def end_trial(self, run_id, status, reason=None):
        self.calls.append(("end_trial", run_id, status))
        self.running.pop(run_id, None)

    def end_sweep(self, run_id, fit, title, status="FINISHED", about=None):
        self.calls.append(("end_sweep", run_id, status))
        self.about = about

    def kill(self, run_id):
        self.calls.append(("kill", run_id))
        self.running.pop(run_id, None)

    def kill_tuning_runs(self, parent, g, b):
        self.calls.append(("kill_tuning_runs", parent, g, b))

    def log_values(self, *a, **k): ...
    def log_decision(self, *a, **k): ...
    def log_probe(self, *a):
        return {"experiment": "groupscale/bandit", "experiment_id": "exp", "run_id": "probe-run", "url": None}


# Network calls, as on Ray and MLflow: each raises NetworkInTransaction inside a store transaction (tests/conftest.py
# turns the check on), so every test below also checks that the scheduler makes none there.
for cls, calls in (
    (
        FakeBackend,
        "connect available_resources nodes unplaced start_trial attach_trial trial_names prewarm evict_idle "
        "reap_idle pool start_task progress wait result kill_trial cancel",
    ),
    (
        FakeTracking,
        "start_sweep start_trial unended_trial_runs reopen_trial end_trial end_sweep kill kill_tuning_runs log_values "
        "log_decision log_probe",
    ),
):
    for name in calls.split():
        setattr(cls, name, outside_transaction(getattr(cls, name)))


@pytest.fixture
def env(tmp_path):
    settings = Settings(data_dir=tmp_path, poll_interval_s=0.01)
    store = Store(settings.resolved_database_url)
    backend, tracking = FakeBackend(), FakeTracking()
    sched = Scheduler(store, settings, tracking, backend)
    yield store, backend, tracking, sched
    store.engine.dispose()


def submit(store, **changes):
    with store.session() as s:
        sweep = Sweep(name="unit", spec={**SPEC, **changes}, task_name="bandit", model_name="tabular")
        s.add(sweep)
        s.flush()
        return sweep.id


def statuses(store, sweep_id):
    with store.read() as s:
        return [t.status for t in s.get(Sweep, sweep_id).trials]


def tick(sched, n=1):
    for _ in range(n):
        sched.tick(wait_s=0)


def test_admission_creates_the_plan_and_launches_only_what_fits(env):
    store, backend, _, sched = env
    sid = submit(store)
    tick(sched)
    assert statuses(store, sid).count(TrialStatus.RUNNING) == 2 and len(statuses(store, sid)) == 6  # 3 G x 2 seeds, 2 CPUs
    assert len(backend.running()) == 2
    backend.finish(backend.running()[0])
    tick(sched, 2)  # collected on the first tick, its CPU reused on the next
    assert statuses(store, sid).count(TrialStatus.SUCCEEDED) == 1 and statuses(store, sid).count(TrialStatus.RUNNING) == 2


def test_other_users_work_on_a_shared_cluster_holds_launches_back(env):
    store, backend, _, sched = env
    backend.busy_elsewhere = 1.0
    sid = submit(store)
    tick(sched, 2)
    assert statuses(store, sid).count(TrialStatus.RUNNING) == 1  # one of the two CPUs is someone else's


def test_a_probe_waits_for_free_resources_like_every_kind(env):
    store, backend, _, sched = env
    submit(store)
    tick(sched)
    probe_id = _probe(store)
    tick(sched)
    with store.read() as s:
        assert s.get(Probe, probe_id).status == "queued"  # both CPUs hold trials
    backend.finish(backend.running()[0])
    tick(sched, 2)
    with store.read() as s:
        assert s.get(Probe, probe_id).status == "running"


def test_a_probe_read_as_succeeded_already_names_its_run(env):
    store, backend, tracking, sched = env
    probe_id = _probe(store)
    seen = []
    log_probe = tracking.log_probe
    tracking.log_probe = lambda *a: seen.append(_probe_status(store, probe_id)) or log_probe(*a)
    tick(sched)
    backend.finish(backend.running("run_probe_task")[0], {"g_star": 3.0})
    tick(sched)
    assert seen == ["running"]  # the run is made before the probe shows as succeeded
    with store.read() as s:
        assert (s.get(Probe, probe_id).status, s.get(Probe, probe_id).mlflow_run_id) == ("succeeded", "probe-run")


def test_a_running_probes_reports_are_stored_and_kept_once_it_ended(env):
    """GET /v1/answers/{id} and /v1/probes/{id} show ``progress``: the scheduler stores what the task reported (each
    tick, outside a transaction), and the last report before its end stays."""
    store, backend, _, sched = env
    probe_id = _probe(store)
    tick(sched)
    (handle,) = backend.running("run_probe_task")
    assert _probe_progress(store, probe_id) is None  # nothing reported yet
    model = {"stage": "model", "label": "building the model preset tiny-llama", "done": 50, "total": 4000}
    backend.work[handle].progress = {**model, "stages": [{"stage": "model", "label": model["label"]}]}
    tick(sched)
    assert _probe_progress(store, probe_id) == backend.work[handle].progress
    probe_stage = {"stage": "probe", "label": "probe: 16 prompts x 4 completions", "done": None, "total": None}
    backend.work[handle].progress = {**probe_stage, "stages": [*backend.work[handle].progress["stages"], probe_stage]}
    backend.finish(handle, {"g_star": 3.0})
    tick(sched)
    with store.read() as s:
        row = s.get(Probe, probe_id)
        assert row.status == "succeeded" and [st["stage"] for st in row.progress["stages"]] == ["model", "probe"]


def _probe_progress(store, probe_id):
    with store.read() as s:
        return s.get(Probe, probe_id).progress


def _probe(store) -> str:
    """A queued probe of SPEC; its id."""
    with store.session() as s:
        probe = Probe(spec={**SPEC, "name": "p"})
        s.add(probe)
        s.flush()
        return probe.id


def _probe_status(store, probe_id):
    with store.read() as s:
        return s.get(Probe, probe_id).status


def test_a_finished_sweep_is_fitted_and_its_parent_run_ends_after_every_child(env):
    store, backend, tracking, sched = env
    sid = submit(store, group_sizes=[2, 4], seeds=[0])
    tick(sched)
    for h, g in zip(backend.running(), (0.3, 0.1)):
        backend.finish(h, {**RESULT, "metrics": {"gap": g, "frac_groups_all_wrong": g}})
    tick(sched)
    with store.read() as s:
        sweep = s.get(Sweep, sid)
        assert sweep.status == SweepStatus.SUCCEEDED and sweep.fit is not None and sweep.mlflow_closed
    kinds = [c[0] for c in tracking.calls]
    assert kinds.count("end_trial") == 2 and kinds[-1] == "end_sweep"
    # the report's keywords: its header's spec and time, and the trials as the API gives them (what each G's groups held)
    assert set(tracking.about) == {"spec", "created", "trials"} and tracking.about["spec"]["group_sizes"] == [2, 4]
    trials = sorted((t["group_size"], t["metrics"]["frac_groups_all_wrong"]) for t in tracking.about["trials"])
    assert len(trials) == 2 and {g for g, _ in trials} == {2, 4} and {v for _, v in trials} == {0.3, 0.1}


def test_cancel_of_a_queued_sweep_launches_nothing(env):
    store, backend, tracking, sched = env
    sid = submit(store)
    with store.session() as s:
        assert lifecycle.cancel_sweep(s, s.get(Sweep, sid))
    tick(sched)
    with store.read() as s:
        assert s.get(Sweep, sid).status == SweepStatus.CANCELLED and not s.get(Sweep, sid).trials
    assert not backend.work


def test_cancel_of_a_running_sweep_kills_its_workers_then_ends_the_parent_run(env):
    store, backend, tracking, sched = env
    sid = submit(store)
    tick(sched)
    running = backend.running()
    with store.session() as s:
        assert lifecycle.cancel_sweep(s, s.get(Sweep, sid))
    assert set(statuses(store, sid)) == {TrialStatus.CANCELLED}  # pending and running, at once
    # The killed workers are collected a tick later; the parent run ends only after their runs.
    tick(sched, 2)
    assert not backend.running() and all(backend.work[h].ended for h in running)
    ends = [c for c in tracking.calls if c[0] in ("end_trial", "end_sweep")]
    assert [c[0] for c in ends] == ["end_trial", "end_trial", "end_sweep"] and ends[-1][2] == "KILLED"
    assert all(c[2] == TrialStatus.CANCELLED for c in ends[:2])
    with store.read() as s:
        assert s.get(Sweep, sid).mlflow_closed
    tick(sched)
    assert [c[0] for c in tracking.calls].count("end_sweep") == 1


def test_cancel_during_lr_tuning_ends_every_tuning_and_trial(env):
    store, backend, tracking, sched = env
    sid = submit(store, tune_lr={"low": 1e-4, "high": 1e-1, "trials": 2, "steps": 2})
    tick(sched)
    with store.read() as s:
        tunings = [t.status for t in s.get(Sweep, sid).lr_tunings]
    assert tunings.count(TuningStatus.RUNNING) == 2 and tunings.count(TuningStatus.PENDING) == 1
    assert not backend.running("trial")  # trials wait for the tuned learning rates
    with store.session() as s:
        lifecycle.cancel_sweep(s, s.get(Sweep, sid))
    tick(sched)
    with store.read() as s:
        sweep = s.get(Sweep, sid)
        assert {t.status for t in sweep.lr_tunings} == {TuningStatus.CANCELLED}
        assert {t.status for t in sweep.trials} == {TrialStatus.CANCELLED}
        assert sweep.mlflow_closed
    assert len(backend.cancelled) == 2 and not backend.running("run_tune_lr")
    assert sum(c[0] == "kill_tuning_runs" for c in tracking.calls) == 2  # the killed searches' runs


def test_a_completion_racing_a_cancel_does_not_undo_it(env):
    store, backend, tracking, sched = env
    sid = submit(store, group_sizes=[2], seeds=[0])
    tick(sched)
    (handle,) = backend.running()
    backend.finish(handle)  # the trial ended ...
    with store.session() as s:  # ... and the cancel landed before the scheduler collected it
        lifecycle.cancel_sweep(s, s.get(Sweep, sid))
    tick(sched)
    assert statuses(store, sid) == [TrialStatus.CANCELLED]
    assert ("end_trial", f"run-{_trial_ids(store, sid)[0]}", TrialStatus.CANCELLED) in tracking.calls


def _trial_ids(store, sid):
    with store.read() as s:
        return [t.id for t in s.get(Sweep, sid).trials]


def test_a_worker_that_died_after_its_retries_fails_saying_so(env):
    store, backend, _, sched = env
    sid = submit(store, group_sizes=[2], seeds=[0])
    tick(sched)
    (tid,) = _trial_ids(store, sid)
    ckpt = Path(sched.ctx.checkpoint_dir(tid))
    ckpt.mkdir(parents=True)
    (ckpt / "starts").write_text("3")  # Ray restarted the worker twice, then it died a third time
    backend.die(backend.running()[0])
    tick(sched)
    with store.read() as s:
        trial = s.get(Trial, tid)
        assert trial.status == TrialStatus.FAILED and trial.attempts == 3
        assert trial.reason.startswith("the worker died 3 times (GROUPSCALE_TRIAL_RETRIES=2)")
    assert not ckpt.exists()


def test_an_exception_in_a_trial_fails_it_without_a_retry(env):
    store, backend, _, sched = env
    sid = submit(store, group_sizes=[2], seeds=[0])
    tick(sched)
    (tid,) = _trial_ids(store, sid)
    handle = backend.running()[0]
    backend.fail(handle, ValueError("reward function r.py:f raised at step 3"))  # raised, not died
    tick(sched)
    with store.read() as s:
        trial = s.get(Trial, tid)
        assert trial.status == TrialStatus.FAILED and trial.reason == "ValueError: reward function r.py:f raised at step 3"
    assert backend.running() == [] and backend.new_workers == 1  # not launched again
    assert backend.released == [backend.work[handle].name]  # the worker is alive: it stays warm for the next trial


def test_past_its_failure_budget_a_sweep_fails_and_cancels_the_rest(env):
    store, backend, tracking, sched = env
    sid = submit(store, max_failed_trials=1)  # 6 trials; 2 CPUs: 2 run at a time
    tick(sched)
    first, second = backend.running()
    backend.fail(first, ValueError("reward r.py:f raised"))
    tick(sched)  # one failure: within the budget, the next trial starts
    assert statuses(store, sid).count(TrialStatus.FAILED) == 1 and len(backend.running()) == 2
    third = next(h for h in backend.running() if h != second)
    backend.fail(third, ValueError("CUDA out of memory"))
    tick(sched)  # two: past the budget of 1
    with store.read() as s:
        sweep = s.get(Sweep, sid)
        assert sweep.status == SweepStatus.FAILED
        assert sweep.error.startswith("2 trials failed, more than max_failed_trials=1")
        assert "reward r.py:f raised" in sweep.error and "CUDA out of memory" in sweep.error
        assert sorted(t.status for t in sweep.trials) == sorted([TrialStatus.FAILED] * 2 + [TrialStatus.CANCELLED] * 4)
    tick(sched, 2)  # the running trial's worker is stopped; nothing new starts
    assert backend.running() == [] and len(backend.work) == 3
    parent = f"parent-{sid}"
    assert tracking.calls[-1] == ("end_sweep", parent, "FAILED")  # after its children's ends
    with store.read() as s:
        assert s.get(Sweep, sid).mlflow_closed


def test_the_default_failure_budget_is_a_quarter_of_the_trials_at_least_3():
    from sweeps.spec import SweepSpec

    assert SweepSpec.model_validate(SPEC).failure_budget == 3  # 6 trials
    assert SweepSpec.model_validate({**SPEC, "seeds": list(range(8))}).failure_budget == 6  # 24 trials
    assert SweepSpec.model_validate({**SPEC, "max_failed_trials": 0}).failure_budget == 0


def test_a_worker_lost_before_the_trials_retries_ran_out_resumes_it_elsewhere(env):
    store, backend, _, sched = env
    sid = submit(store, group_sizes=[2], seeds=[0])
    tick(sched)
    (tid,) = _trial_ids(store, sid)
    ckpt = Path(sched.ctx.checkpoint_dir(tid))
    ckpt.mkdir(parents=True)
    (ckpt / "starts").write_text("1")  # the worker had used its restarts on earlier trials
    backend.die(backend.running()[0])
    tick(sched)  # collected: back to pending, and launched again on the same tick
    with store.read() as s:
        trial = s.get(Trial, tid)
        assert trial.status == TrialStatus.RUNNING and trial.attempts == 2 and trial.reason is None
    assert ckpt.exists() and len(backend.running()) == 1  # its checkpoint is kept for the resume


def test_a_collected_trial_hands_its_worker_to_the_next_one(env):
    store, backend, _, sched = env
    submit(store, group_sizes=[2, 4], seeds=[0, 1])
    tick(sched)
    first = backend.running()[0]
    backend.finish(first)
    tick(sched)
    assert backend.released == [backend.work[first].name] and len(backend.running()) == 2  # refilled on the same tick
    assert (backend.new_workers, backend.reused, backend.idle) == (2, 1, [])  # on the freed worker, none left idle


def test_restart_reattaches_live_trials_and_resumes_the_others(env, tmp_path):
    store, backend, tracking, sched = env
    sid = submit(store, group_sizes=[2, 4], seeds=[0])
    tick(sched)
    ids = _trial_ids(store, sid)
    with store.session() as s:
        probe = Probe(spec={**SPEC, "name": "p"}, status="running")
        s.add(probe)
        s.flush()
        probe_id = probe.id
    # The controller dies; one trial's actor is gone with its node, the other still runs.
    backend.die(backend.alive.pop(trial_actor_name(ids[1])))
    fresh = Scheduler(store, sched.ctx.settings, tracking, backend)
    fresh.reconcile()
    assert [w.id for w in fresh.inflight.values()] == [ids[0]]
    with store.read() as s:
        assert s.get(Trial, ids[0]).status == TrialStatus.RUNNING and s.get(Trial, ids[1]).status == TrialStatus.PENDING
        assert s.get(Probe, probe_id).status == "queued"
    fresh.tick(wait_s=0)  # probes go first: the probe runs again on the free CPU
    with store.read() as s:
        assert s.get(Probe, probe_id).status == "running"
    backend.finish(backend.running("run_probe_task")[0], {"g_star": 4.0})
    tick(fresh, 2)  # then the lost trial starts again (it resumes from its checkpoint in the worker)
    assert statuses(store, sid) == [TrialStatus.RUNNING, TrialStatus.RUNNING]


def test_the_transition_table_refuses_illegal_moves(env):
    store, *_ = env
    sid = submit(store)
    with store.session() as s:
        sweep = s.get(Sweep, sid)
        with pytest.raises(IllegalTransition, match="queued -> succeeded"):
            lifecycle.transition(s, sweep, SweepStatus.SUCCEEDED)
        assert lifecycle.transition(s, sweep, SweepStatus.RUNNING)
        tuning = LrTuning(sweep_id=sid, group_size=2, samples_per_step=16, status=TuningStatus.SUCCEEDED)
        s.add(tuning)
        s.flush()
        with pytest.raises(IllegalTransition, match="a final status"):
            lifecycle.transition(s, tuning, TuningStatus.RUNNING)
    assert lifecycle.TRIAL_TERMINAL == {"succeeded", "failed", "no_signal", "cancelled"}


def test_a_stale_compare_and_set_loses_and_reloads(env):
    store, *_ = env
    sid = submit(store)
    with store.session() as s:
        stale = s.get(Sweep, sid)  # read as queued; then another writer cancels it (SQL behind the ORM's back)
        s.execute(update(Sweep).where(Sweep.id == sid).values(status="cancelled").execution_options(synchronize_session=False))
        assert stale.status == SweepStatus.QUEUED
        assert not lifecycle.transition(s, stale, SweepStatus.RUNNING)
        assert stale.status == SweepStatus.CANCELLED


def queue_probe(store, **changes):
    with store.session() as s:
        probe = Probe(spec={**SPEC, "name": "p", **changes})
        s.add(probe)
        s.flush()
        return probe.id


def test_prewarmed_workers_take_the_first_trials(env):
    store, backend, _, sched = env
    sched.prewarm()  # a local head of 2 CPUs: 2 warm workers of 1 CPU
    assert len(backend.idle) == 2
    submit(store)
    tick(sched)
    assert len(backend.running()) == 2 and (backend.new_workers, backend.reused, backend.idle) == (0, 2, [])


@pytest.mark.parametrize(
    ("ray_address", "warm", "cpus", "expected"),
    [(None, None, 2, 2), (None, None, 8, 4), ("ray://x:1", None, 2, 0), (None, 1, 2, 1)],  # the head's CPUs, at most 4
)
def test_how_many_workers_start_warm(tmp_path, ray_address, warm, cpus, expected):
    settings = Settings(data_dir=tmp_path, ray_address=ray_address, warm_workers=warm)
    store, backend = Store(settings.resolved_database_url), FakeBackend(cpus=cpus)
    Scheduler(store, settings, None, backend).prewarm()
    assert len(backend.idle) == expected
    store.engine.dispose()


def test_work_that_no_idle_worker_can_take_evicts_only_what_it_needs(env):
    store, backend, _, sched = env
    sched.prewarm()
    probe_id = queue_probe(store)  # a task: it cannot run on a trial worker
    tick(sched)
    with store.read() as s:
        assert s.get(Probe, probe_id).status == "running"
    assert len(backend.idle) == 1  # one of the two idle workers made room; the other stays warm
    submit(store, resources={"cpus_per_trial": 1})
    tick(sched)
    assert backend.reused == 1 and not backend.idle  # the next trial takes the warm one


def test_a_trial_of_another_shape_evicts_the_idle_workers(env):
    store, backend, _, sched = env
    sched.prewarm()
    submit(store, resources={"cpus_per_trial": 2})
    tick(sched)
    assert len(backend.running()) == 1 and backend.new_workers == 1 and not backend.idle


def test_idle_workers_stop_after_worker_idle_s(env):
    store, backend, _, sched = env
    sched.prewarm()
    backend.now = sched.ctx.settings.worker_idle_s - 1
    tick(sched)
    assert len(backend.idle) == 2  # still warm
    backend.now = sched.ctx.settings.worker_idle_s
    tick(sched)
    assert not backend.idle


def test_the_next_trials_runs_are_made_ahead_and_a_collected_run_ends_after_the_next_start(env):
    """MLflow's latency is not spent with a freed worker idle: the runs of the trials that start next are
    made while the running ones train, and a collected trial's run ends after the next trial started."""
    store, backend, tracking, sched = env
    sid = submit(store, group_sizes=[2, 4, 8], seeds=[0, 1])  # 6 trials, 2 CPUs
    tick(sched)
    sched.ctx.drain()
    made = [c[1] for c in tracking.calls if c[0] == "start_trial"]
    assert len(made) == 4 and sorted(sched.ctx.prepared()) == sorted(m.removeprefix("run-") for m in made[2:])
    first = backend.running()[0]
    backend.finish(first)
    tracking.calls.clear()
    tick(sched)
    sched.ctx.drain()
    with store.read() as s:
        third = s.get(Sweep, sid).trials[2]
        assert third.status == TrialStatus.RUNNING and third.mlflow_run_id == made[2]  # the run made ahead
    calls = dict((c[0], c[1]) for c in tracking.calls)  # the fifth trial's run made ahead; the first's run ended
    assert len(tracking.calls) == 2 and calls["end_trial"] == f"run-{backend.work[first].name.removeprefix('trial-')}"
    assert calls["start_trial"] not in made


def test_runs_made_ahead_for_trials_a_cancel_ended_are_killed(env):
    store, backend, tracking, sched = env
    sid = submit(store, group_sizes=[2, 4, 8], seeds=[0, 1])
    tick(sched)
    sched.ctx.drain()
    ahead = [f"run-{t}" for t in sched.ctx.prepared()]
    with store.session() as s:
        lifecycle.cancel_sweep(s, s.get(Sweep, sid))
    tick(sched, 2)
    killed = {c[1] for c in tracking.calls if c[0] == "kill"}
    assert len(ahead) == 2 and set(ahead) <= killed and not sched.ctx.prepared()


def test_a_restart_adopts_the_runs_made_ahead_that_were_not_stored(env):
    """A controller killed after making the next trials' runs ahead: the next one gives each its run."""
    store, backend, tracking, sched = env
    sid = submit(store, group_sizes=[2, 4, 8], seeds=[0])
    tick(sched)
    sched.ctx.drain()
    (ahead,) = sched.ctx.prepared()  # the third trial's run was made, only in the dead controller's memory
    fresh = Scheduler(store, sched.ctx.settings, tracking, backend)
    fresh.reconcile()
    with store.read() as s:
        trials = {t.id: t for t in s.get(Sweep, sid).trials}
        assert trials[ahead].status == TrialStatus.PENDING and trials[ahead].mlflow_run_id == f"run-{ahead}"
    backend.finish(backend.running()[0])
    tracking.calls.clear()
    tick(fresh)
    with store.read() as s:
        assert s.get(Trial, ahead).status == TrialStatus.RUNNING
    assert ("start_trial", f"run-{ahead}") not in tracking.calls  # not made twice


def test_a_worker_that_died_for_good_is_never_handed_another_trial(env):
    store, backend, _, sched = env
    submit(store, group_sizes=[2], seeds=[0])
    tick(sched)
    backend.die(backend.running()[0])  # its restarts used up: the trial goes back to pending
    tick(sched)
    assert backend.reused == 0 and backend.new_workers == 2 and len(backend.running()) == 1  # on a new worker


def test_a_sweep_that_cannot_start_says_why_and_health_shows_the_repeated_failure(env, caplog):
    """The MLflow parent run keeps failing the same way (a deleted experiment MLflow refused to restore): the sweep
    stays queued with the reason in its error, one traceback is logged (not one a tick), and after REPORT_AFTER
    ticks the failure is a problem of the controller; once it succeeds the error and the problem are gone."""
    from service.scheduler.faults import REPORT_AFTER

    store, _, tracking, sched = env
    refused = RuntimeError("the MLflow experiment groupscale/bandit (id 7) is deleted and could not be restored")
    start_sweep = tracking.start_sweep
    tracking.start_sweep = outside_transaction(lambda *a: (_ for _ in ()).throw(refused))
    sid = submit(store)
    tick(sched, REPORT_AFTER - 1)
    assert sched.faults.problems() == []
    tick(sched)
    with store.read() as s:
        sweep = s.get(Sweep, sid)
        assert sweep.status == SweepStatus.QUEUED
        assert sweep.error == f"queued: its MLflow parent run could not be made ({REPORT_AFTER} tries): RuntimeError: {refused}"
    [problem] = sched.faults.problems()
    assert problem.startswith(f"admitting sweep {sid}: failed {REPORT_AFTER} times in a row since ") and str(refused) in problem
    assert sum(r.exc_info is not None for r in caplog.records) == 1
    tracking.start_sweep = start_sweep
    tick(sched)
    with store.read() as s:
        sweep = s.get(Sweep, sid)
        assert (sweep.status, sweep.error) == (SweepStatus.RUNNING, None)
    assert sched.faults.problems() == []


def test_a_cancel_while_a_trials_mlflow_run_is_made_ends_that_run(tmp_path):
    """A real MLflow server: the cancel lands while start_trial creates the trial's run. The tick used to raise
    IllegalTransition (the trial was cancelled, not pending) and the run stayed RUNNING for good."""
    from mlflow import MlflowClient

    from service.stack import start_mlflow, stop_process_group
    from service.tracking import Tracking
    from tests.ports import free_port

    port = free_port()
    proc = start_mlflow(tmp_path, "127.0.0.1", port)
    try:
        settings = Settings(data_dir=tmp_path, poll_interval_s=0.01)
        store, tracking = Store(settings.resolved_database_url), Tracking(f"http://127.0.0.1:{port}")
        sched = Scheduler(store, settings, tracking, FakeBackend())
        sid = submit(store)
        make_run = tracking.start_trial

        def make_run_while_cancelled(*args):
            run_id = make_run(*args)
            with store.session() as s:
                lifecycle.cancel_sweep(s, s.get(Sweep, sid))
            return run_id

        tracking.start_trial = make_run_while_cancelled
        tick(sched, 3)
        sched.ctx.drain()
        with store.read() as s:
            sweep = s.get(Sweep, sid)
            experiment_id, closed = sweep.mlflow_experiment_id, sweep.mlflow_closed
            assert {t.status for t in sweep.trials} == {TrialStatus.CANCELLED}
            stored = {t.mlflow_run_id for t in sweep.trials} - {None}
        runs = MlflowClient(tracking.uri).search_runs([experiment_id])
        assert closed and stored and stored <= {r.info.run_id for r in runs}  # the tick went on launching the rows it read
        assert {r.info.status for r in runs} == {"KILLED"}, [(r.info.run_name, r.info.status) for r in runs]
        store.engine.dispose()
    finally:
        stop_process_group(proc)


def test_a_cancel_between_reading_an_lr_tuning_and_launching_it_launches_nothing(env):
    store, backend, _, sched = env
    sid = submit(store, tune_lr={"low": 1e-4, "high": 1e-1, "trials": 2, "steps": 2})
    sched.admission.admit()
    job = sched.jobs["tune"]
    with store.read() as s:
        ready = list(job.ready(sched.ctx, s))
    with store.session() as s:
        lifecycle.cancel_sweep(s, s.get(Sweep, sid))
    assert [job.launch(sched.ctx, r) for r in ready] == [None] * len(ready)
    assert not backend.running("run_tune_lr")


# -- trials and nodes (service.scheduler.placement) ----------------------------------------------------------------


def test_a_shape_no_node_holds_is_refused_naming_the_largest_node_unless_an_autoscaler_adds_nodes():
    from service.preflight import SpecError, preflight
    from sweeps.spec import SweepSpec

    three = [{"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0, "GPU": 0.0}]  # 3 CPUs in all, 1 on each node
    two_cpus = SweepSpec.model_validate({**SPEC, "resources": {"cpus_per_trial": 2}})
    with pytest.raises(SpecError) as e:
        preflight(two_cpus, Settings(), three)
    assert e.value.loc == ("resources", "cpus_per_trial")
    assert "fit no node of the cluster (3 alive); its largest node has 1 CPU; allowed: more than 0 to 1" in e.value.msg
    gpu = SweepSpec.model_validate({**SPEC, "resources": {"cpus_per_trial": 2, "gpus_per_trial": 1}})
    with pytest.raises(SpecError) as e:  # the GPU node has 1 CPU: the field over it is the CPUs
        preflight(gpu, Settings(), [{"CPU": 8.0}, {"CPU": 1.0, "GPU": 1.0}])
    assert e.value.loc == ("resources", "cpus_per_trial")
    assert "largest node has 1 CPU and 1 GPU; allowed: more than 0 to 1" in e.value.msg
    with pytest.raises(SpecError) as e:  # no GPU anywhere: said so
        preflight(gpu, Settings(), [{"CPU": 2.0, "GPU": 0.0}])
    assert e.value.loc == ("resources", "gpus_per_trial")
    assert "its largest node has 2 CPUs and no GPU; allowed: 0 (no node of the cluster has a GPU)" in e.value.msg
    assert preflight(two_cpus, Settings(), [*three, {"CPU": 2.0}]) == []
    assert preflight(gpu, Settings(autoscaling=True), three) == []  # it waits for the autoscaler's node


def test_a_trial_of_several_processes_fits_the_nodes_together_or_is_refused_naming_how_many_do():
    """P processes are a placement group of P bundles: two 1-CPU nodes hold 2 processes of 1 CPU (spread), not 3; a
    process bigger than every node is the process's field."""
    from service.preflight import SpecError, preflight
    from sweeps.spec import SweepSpec

    two = [{"CPU": 1.0}, {"CPU": 1.0}]
    assert preflight(SweepSpec.model_validate({**SPEC, "resources": {"num_processes": 2}}), Settings(), two) == []
    with pytest.raises(SpecError) as e:
        preflight(SweepSpec.model_validate({**SPEC, "group_sizes": [2, 4], "resources": {"num_processes": 3}}), Settings(), two)
    assert e.value.loc == ("resources", "num_processes")
    assert "num_processes=3 of 1 CPU each do not fit the cluster (2 alive nodes hold 2 such processes" in e.value.msg
    assert "allowed: 1 to 2" in e.value.msg
    big = SweepSpec.model_validate({**SPEC, "resources": {"num_processes": 2, "cpus_per_process": 2}})
    with pytest.raises(SpecError) as e:
        preflight(big, Settings(), two)
    assert e.value.loc == ("resources", "cpus_per_process")
    assert "cpus_per_process=2 and gpus_per_process=0 fit no node" in e.value.msg


def test_a_trial_of_two_processes_holds_both_and_starts_a_placement_group_of_its_own(env):
    """A 2-process trial takes 2 of the 2 CPUs (one runs at a time), is started with its per-process shape and
    P = 2, never on a warm worker, and its worker is stopped when it ends (its placement group with it)."""
    store, backend, _, sched = env
    sched.prewarm()
    sid = submit(store, group_sizes=[2, 4], seeds=[0], resources={"num_processes": 2})
    tick(sched)
    (h,) = backend.running()
    assert (backend.work[h].cpus, backend.work[h].processes) == (2.0, 2)  # 1 CPU for each of 2 processes
    assert statuses(store, sid).count(TrialStatus.RUNNING) == 1 and backend.reused == 0
    warm = list(backend.idle)
    backend.finish(h)
    tick(sched, 2)
    assert statuses(store, sid).count(TrialStatus.SUCCEEDED) == 1 and statuses(store, sid).count(TrialStatus.RUNNING) == 1
    assert backend.idle == warm  # not kept warm: stopped with its placement group


def test_a_sweep_waiting_for_a_shape_does_not_hold_back_a_smaller_one_behind_it(env):
    store, backend, _, sched = env
    sched.ctx.settings.autoscaling = True
    big = submit(store, group_sizes=[2], seeds=[0, 1], resources={"cpus_per_trial": 1, "gpus_per_trial": 1})
    small = submit(store, group_sizes=[2], seeds=[0])
    tick(sched)
    (gpu_trial,) = [h for h in backend.running() if backend.work[h].gpus == 1]  # one asks the autoscaler for a node
    assert statuses(store, big).count(TrialStatus.RUNNING) == 1 and statuses(store, small) == [TrialStatus.RUNNING]
    tick(sched)
    with store.read() as s:  # said from the next tick: no node of its shape is alive (not after the backend's 60 s)
        assert {t.reason for t in s.get(Sweep, big).trials} == {None, "waiting for a node with 1 CPU and 1 GPU for 0s"}
    backend.late[backend.work[gpu_trial].name] = 185.0
    tick(sched)
    with store.read() as s:
        reasons = {t.status: t.reason for t in s.get(Sweep, big).trials}
    assert reasons[TrialStatus.RUNNING] == "waiting for a node with 1 CPU and 1 GPU for 3m"
    assert sched.missing_shapes() == ["1 CPU and 1 GPU (1 trial, 3m)"]
    backend.late.clear()  # the node came: placed
    backend.node_list.append({"CPU": 4.0, "GPU": 1.0})
    sched.cluster.read_at = 0.0  # the cluster is read again now (its cache lasts RESOURCES_TTL_S)
    tick(sched)
    with store.read() as s:
        assert {t.reason for t in s.get(Sweep, big).trials} == {None}
    assert sched.missing_shapes() == []


def test_a_trial_whose_node_died_gets_the_room_of_idle_workers_at_once(env):
    """3 one-CPU nodes, one lost: the lost trial's worker waits for a node while an idle warm worker holds a CPU. It is
    stopped at once (not after worker_idle_s), nothing new takes the room, and once placed the trial counts again."""
    store, backend, _, sched = env
    backend.node_list = [{"CPU": 1.0}] * 3
    sid = submit(store, group_sizes=[2, 4, 8], seeds=[0, 1])
    tick(sched)
    assert len(backend.running()) == 3
    first, lost = backend.running()[0], backend.running()[2]
    backend.node_list = [{"CPU": 1.0}] * 2  # a node died
    backend.late[backend.work[lost].name] = 6.0
    backend.finish(first)  # its worker goes idle, warm, on a surviving node
    tick(sched)
    assert not backend.idle  # the idle worker was stopped for the lost trial
    # the lost trial keeps its room (Ray places it there): nothing new starts on it meanwhile
    assert len(backend.running()) == 2 and statuses(store, sid).count(TrialStatus.RUNNING) == 2
    backend.late[backend.work[lost].name] = 75.0
    tick(sched)
    assert sched.missing_shapes() == []  # a node of its shape is alive: it waits for room, nothing is missing
    backend.late.clear()
    backend.finish(backend.running()[0])
    tick(sched, 2)
    assert len(backend.running()) == 2 and statuses(store, sid).count(TrialStatus.SUCCEEDED) == 2


def test_a_cancelled_trial_loses_its_waiting_reason_and_a_failure_keeps_its_own(env):
    store, backend, _, sched = env
    sched.ctx.settings.autoscaling = True
    sid = submit(store, group_sizes=[2], seeds=[0, 1], resources={"cpus_per_trial": 1, "gpus_per_trial": 1})
    tick(sched, 2)
    with store.read() as s:
        assert {t.reason for t in s.get(Sweep, sid).trials} == {None, "waiting for a node with 1 CPU and 1 GPU for 0s"}
    with store.session() as s:
        assert lifecycle.cancel_sweep(s, s.get(Sweep, sid))
    tick(sched, 3)
    with store.read() as s:
        assert [(t.status, t.reason) for t in s.get(Sweep, sid).trials] == [(TrialStatus.CANCELLED, None)] * 2
    with store.session() as s:  # a reason of its own is never cleared by the placement
        s.get(Sweep, sid).trials[0].reason = "the worker died 3 times"
    from service.scheduler.placement import store_reasons

    with store.session() as s:
        store_reasons(s, {s.get(Sweep, sid).trials[0].id: None})
    with store.read() as s:
        assert s.get(Sweep, sid).trials[0].reason == "the worker died 3 times"


def test_the_ray_backend_stops_a_several_process_trials_worker_when_it_is_released(tmp_path, monkeypatch):
    """A one-process trial's worker stays warm; a several-process trial's (rank 0, in a placement group of its own) is
    stopped with its group (Ray's calls themselves are the backend's e2e tests')."""
    from service.scheduler.pool import PooledWorker
    from service.scheduler.ray_backend import RayBackend

    backend = RayBackend(Settings(data_dir=tmp_path))
    killed: list[str] = []
    monkeypatch.setattr(backend, "_kill_worker", lambda name: killed.append(name) or backend.warm.workers.pop(name))
    backend.warm.workers = {"one": PooledWorker(None, 1.0, 0.0, 1, "trial-a"), "two": PooledWorker(None, 1.0, 0.0, 2, "trial-b")}
    backend.release_trial("trial-a")
    backend.release_trial("trial-b")
    assert killed == ["two"] and backend.warm.workers["one"].trial is None


# -- a launch that raises (issue 54.6): that row fails saying why; every other sweep goes on ----------------------


def _refusing(backend, doomed: str, error: Exception, method: str = "start_trial"):
    """The backend's ``method`` raises ``error`` for the work named ``doomed`` (a trial's actor name, or a task's function
    name) and starts every other as before."""
    real = getattr(type(backend), method)

    def start(name_or_fn, *args, **kwargs):
        if getattr(name_or_fn, "__name__", name_or_fn) == doomed:
            raise error
        return real(backend, name_or_fn, *args, **kwargs)

    setattr(backend, method, start)


def test_a_trial_whose_launch_raises_fails_saying_why_and_the_other_sweeps_trials_run_to_the_end(env, monkeypatch):
    """The launch of one sweep's trial raises every time (here: its arguments cannot be sent to the cluster): the tick
    used to raise at it, so no later sweep's trial ever launched until that sweep was cancelled. Now the trial waits a
    few ticks (a cluster that refused once may take it next time), then fails with the reason, and the other sweep's
    trials launch, run and are fitted."""
    from service.scheduler import launching

    monkeypatch.setattr(launching, "LAUNCH_GRACE_S", 0.0)
    store, backend, tracking, sched = env
    bad = submit(store, group_sizes=[2], seeds=[0])  # first: its trial is the first one every tick tries
    good = submit(store, group_sizes=[2, 4], seeds=[0, 1])
    sched.admission.admit()
    (doomed,) = _trial_ids(store, bad)
    _refusing(backend, trial_actor_name(doomed), TypeError("cannot pickle '_thread.lock' object"))
    for _ in range(20):
        tick(sched)
        for handle in backend.running():
            backend.finish(handle)
    with store.read() as s:
        trial = s.get(Trial, doomed)
        reason = f"its launch failed {launching.LAUNCH_TRIES} times in a row: TypeError: cannot pickle '_thread.lock' object"
        assert (trial.status, trial.reason, trial.attempts) == (TrialStatus.FAILED, reason, 0)
        assert s.get(Sweep, bad).status == SweepStatus.FAILED and reason in s.get(Sweep, bad).error  # no trial finished
        assert s.get(Sweep, good).status == SweepStatus.SUCCEEDED
        assert {t.status for t in s.get(Sweep, good).trials} == {TrialStatus.SUCCEEDED}
    assert sched.faults.problems() == []  # ended: nothing left failing
    sched.ctx.drain()
    assert ("end_trial", f"run-{doomed}", TrialStatus.FAILED) in tracking.calls  # its MLflow run ends with it


def test_a_launch_refused_once_is_tried_again_and_runs(env):
    """A refusal that passes (the Ray head answered late) costs the trial nothing: pending as never launched, then run."""
    store, backend, _, sched = env
    sid = submit(store, group_sizes=[2], seeds=[0])
    sched.admission.admit()
    (tid,) = _trial_ids(store, sid)
    _refusing(backend, trial_actor_name(tid), ConnectionError("the Ray head does not answer"))
    tick(sched)
    with store.read() as s:
        assert (s.get(Trial, tid).status, s.get(Trial, tid).attempts) == (TrialStatus.PENDING, 0)
    del backend.start_trial  # the cluster answers again
    tick(sched)
    assert statuses(store, sid) == [TrialStatus.RUNNING] and len(backend.running()) == 1


def test_launches_refused_while_the_cluster_is_away_fail_no_trial(env, monkeypatch):
    """The Ray head goes away between the tick's look at the resources and the launch: every launch raises, tick after
    tick, past the grace period. That is the cluster's failure, not the trial's: it waits (pending) and runs once the
    head is back, instead of failing and spending its sweep's failure budget."""
    from service.scheduler import launching

    monkeypatch.setattr(launching, "LAUNCH_GRACE_S", 0.0)
    store, backend, _, sched = env
    sid = submit(store, group_sizes=[2], seeds=[0])
    sched.admission.admit()
    (tid,) = _trial_ids(store, sid)
    _refusing(backend, trial_actor_name(tid), ConnectionError("the Ray head does not answer"))
    monkeypatch.setattr(sched.launcher.cluster, "healthy", lambda: False)
    for _ in range(2 * launching.LAUNCH_TRIES):
        tick(sched)
    assert statuses(store, sid) == [TrialStatus.PENDING]
    monkeypatch.undo()  # the head is back
    del backend.start_trial
    tick(sched)
    assert statuses(store, sid) == [TrialStatus.RUNNING]


@pytest.mark.parametrize("kind", ["probe", "tune"])
def test_a_probe_or_lr_tuning_whose_launch_raises_fails_saying_why_and_a_sweeps_trials_still_run(env, monkeypatch, kind):
    from service.scheduler import launching

    monkeypatch.setattr(launching, "LAUNCH_GRACE_S", 0.0)
    store, backend, _, sched = env
    if kind == "probe":
        job = _probe(store)
        _refusing(backend, "run_probe_task", RuntimeError("the task's resources are invalid"), "start_task")
    else:
        tuned = submit(store, group_sizes=[2], seeds=[0], tune_lr={"low": 1e-4, "high": 1e-1, "trials": 2, "steps": 2})
        _refusing(backend, "run_tune_lr", RuntimeError("the task's resources are invalid"), "start_task")
    sid = submit(store, group_sizes=[2, 4], seeds=[0])
    for _ in range(10):
        tick(sched)
        for handle in backend.running():
            backend.finish(handle)
    reason = f"its launch failed {launching.LAUNCH_TRIES} times in a row: RuntimeError: the task's resources are invalid"
    with store.read() as s:
        if kind == "probe":
            assert (s.get(Probe, job).status, s.get(Probe, job).error) == ("failed", reason)
        else:
            (tuning,) = s.get(Sweep, tuned).lr_tunings
            assert (tuning.status, tuning.error) == (TuningStatus.FAILED, reason)
            assert s.get(Sweep, tuned).status == SweepStatus.SUCCEEDED  # its trials ran with the spec's lr
        assert s.get(Sweep, sid).status == SweepStatus.SUCCEEDED
