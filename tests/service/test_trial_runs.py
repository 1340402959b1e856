"""One MLflow child run per trial, on a real MLflow server: a trial interrupted by a stop of `groupscale up` (its local
Ray head stops with it) continues its own run on the next start, and the runs made ahead for the trials that had not
started are taken by them, instead of each ending KILLED beside a new run."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from service.lifecycle import SweepStatus, TrialStatus
from service.scheduler import Scheduler
from service.settings import Settings
from service.stack import start_mlflow, stop_process_group
from service.store import Store, Sweep
from service.tracking import Tracking
from tests.ports import free_port
from tests.service.test_scheduler import FakeBackend, submit, tick


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
