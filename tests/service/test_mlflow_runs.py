"""Where the controller's runs land, on a real MLflow server. One child run per trial: a trial interrupted by a stop of
`groupscale up` (its local Ray head stops with it) continues its own run on the next start, and the runs made ahead for
the trials that had not started are taken by them, instead of each ending KILLED beside a new run. An answer's run is
in an experiment of its own, named in the answer."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from service.lifecycle import SweepStatus, TrialStatus
from service.scheduler import Scheduler
from service.settings import Settings
from service.stack import start_mlflow, stop_process_group
from service.store import Probe, ProbeKind, Store, Sweep
from service.tracking import Tracking
from sweeps.answer import Answer
from sweeps.answer.result import Cost, PassRate, Regret
from tests.ports import free_port
from tests.service.test_scheduler import SPEC, FakeBackend, submit, tick


@pytest.fixture
def mlflow_uri(tmp_path):
    port = free_port()
    proc = start_mlflow(tmp_path / "mlflow", "127.0.0.1", port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process_group(proc)


def _finish_everything(sched: Scheduler, backend: FakeBackend, store: Store, sweep_id: str) -> None:
    for _ in range(50):
        for handle in backend.running():
            backend.finish(handle)
        tick(sched)
        with store.read() as s:
            if s.get(Sweep, sweep_id).status == SweepStatus.SUCCEEDED:
                return
    raise AssertionError("the sweep did not end")


def test_a_stop_and_restart_of_up_leaves_one_run_per_trial_each_continued_to_its_end(tmp_path, mlflow_uri):
    """A new user saw 12 child runs for 8 trials after Ctrl-C and `up` again: the stop ended the running trials' runs
    and the runs made ahead KILLED and forgot them, and the next start made each trial a new run."""
    settings = Settings(data_dir=tmp_path, poll_interval_s=0.01, ray_address=None)
    store, tracking = Store(settings.resolved_database_url), Tracking(mlflow_uri)
    sched = Scheduler(store, settings, tracking, FakeBackend())
    sid = submit(store, group_sizes=[2, 4, 8, 16], seeds=[0])  # 2 CPUs: two run, the next ones' runs are made ahead
    tick(sched)
    sched.ctx.drain()
    with store.read() as s:
        sweep = s.get(Sweep, sid)
        experiment_id, parent = sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id
        before = {t.id: t.mlflow_run_id for t in sweep.trials if t.status == TrialStatus.RUNNING}
    assert len(before) == 2 and sched.ctx.prepared()
    sched.stop()  # Ctrl-C: the local Ray head stops with the controller, its trials go back to pending

    client = MlflowClient(mlflow_uri)
    children = f"tags.mlflow.parentRunId = '{parent}'"
    assert {r.info.status for r in client.search_runs([experiment_id], children)} == {"KILLED"}  # none left RUNNING

    backend = FakeBackend()  # the next `up`: a new Ray head, nothing of the old one alive
    fresh = Scheduler(store, settings, tracking, backend)
    fresh.reconcile()
    tick(fresh)
    fresh.ctx.drain()
    with store.read() as s:
        resumed = {t.id: t.mlflow_run_id for t in s.get(Sweep, sid).trials if t.id in before}
    assert resumed == before  # each interrupted trial continues its own run
    assert {client.get_run(r).info.status for r in before.values()} == {"RUNNING"}  # open again while it trains

    _finish_everything(fresh, backend, store, sid)
    fresh.ctx.drain()
    with store.read() as s:
        stored = {t.id: t.mlflow_run_id for t in s.get(Sweep, sid).trials}
    runs = client.search_runs([experiment_id], children)
    by_trial = sorted((r.data.tags["groupscale.trial_id"], r.info.run_id, r.info.status) for r in runs)
    assert by_trial == sorted((t, r, "FINISHED") for t, r in stored.items())  # one run per trial, each FINISHED
    store.engine.dispose()


ANSWER = Answer(
    method="staged",
    status="ok",
    g_star=4.1,
    g_star_ci95=[3.7, 4.4],
    recommended_group_size=4,
    evidence="strong",
    evidence_reason="the law beats a constant",
    regret_g8=Regret(group_size=8, versus=4),
    regret_passrate=Regret(group_size=2, versus=4),
    passrate=PassRate(p=0.5, epsilon=0.1, group_size=2),
    cost=Cost(completions=1200, budget=5000, grid_completions=15008, fraction_of_grid=0.08, seconds=3.0),
    message="use G = 4, strong evidence",
).model_dump(mode="json")


def test_an_answers_run_is_in_an_experiment_of_its_own_which_the_answer_names(tmp_path, mlflow_uri):
    """A new user found the runs of `groupscale answer` among the sweep's runs in the task's experiment."""
    settings = Settings(data_dir=tmp_path, poll_interval_s=0.01, ray_address=None)
    store, tracking = Store(settings.resolved_database_url), Tracking(mlflow_uri)
    backend = FakeBackend()
    sched = Scheduler(store, settings, tracking, backend)
    sid = submit(store, group_sizes=[2], seeds=[0])
    with store.session() as s:
        answer = Probe(spec=SPEC, status="queued", kind=ProbeKind.ANSWER)
        s.add(answer)
        s.flush()
        answer_id = answer.id
    tick(sched)  # the answer first (probes go first), then the sweep
    backend.finish(backend.running("run_answer_task")[0], ANSWER)
    tick(sched, 2)
    sched.ctx.drain()
    with store.read() as s:
        row, sweep = s.get(Probe, answer_id), s.get(Sweep, sid)
        result, run_id, experiment_id = row.result, row.mlflow_run_id, sweep.mlflow_experiment_id
        assert row.status == "succeeded" and run_id
    client = MlflowClient(mlflow_uri)
    assert client.get_experiment(experiment_id).name == "groupscale/bandit"  # the sweep's, as before
    assert client.search_runs([experiment_id], "tags.`groupscale.kind` = 'answer'") == []
    own = client.get_experiment_by_name("groupscale/bandit/answers")
    assert own is not None and own.tags["mlflow.experimentKind"] == "custom_model_development"
    assert client.get_run(run_id).info.experiment_id == own.experiment_id
    where = {"experiment": own.name, "experiment_id": own.experiment_id, "run_id": run_id}
    assert result["mlflow"] == {**where, "url": tracking.run_url(own.experiment_id, run_id)}  # the answer says where
    assert Answer.model_validate(result).model_dump(mode="json") == ANSWER  # the rest is the answer as it was
    store.engine.dispose()
