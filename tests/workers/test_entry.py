"""What a worker runs (workers.entry): a trial started again logs into its MLflow run each step once, whatever happened
to its checkpoint, and keeps its count of starts where every node reads it."""

import shutil
import socket

import pytest
from mlflow import MlflowClient

from sweeps import storage
from tests.workers.test_bandit import bandit_cfg
from tests.workers.test_tracking_retry import mlflow_uri  # noqa: F401 - the fixture
from workers.worker import count_start, run_trial, worker_starts


@pytest.mark.e2e
def test_a_trial_started_again_without_its_checkpoint_logs_each_step_once(mlflow_uri, tmp_path):  # noqa: F811
    """The first start checkpointed on a node whose disk was lost with it: the second starts from step 0, and the
    steps the run already holds are not logged again (before: every step of every metric twice)."""
    client = MlflowClient(mlflow_uri)
    run_id = client.create_run(client.create_experiment("restart")).info.run_id
    ckpt = tmp_path / "ckpt"
    cfg = bandit_cfg(steps=6, checkpoint_every=2, checkpoint_dir=str(ckpt), eval_every=2).to_dict()
    first = run_trial(cfg, mlflow_uri, run_id, worker_starts=1)
    shutil.rmtree(ckpt)  # the node's disk, gone
    second = run_trial(cfg, mlflow_uri, run_id, worker_starts=2)
    assert second["metrics"]["gap"] == pytest.approx(first["metrics"]["gap"])
    keys = [k for k in client.get_run(run_id).data.metrics if not k.startswith("system/")]
    assert {"gap", "reward_mean"} <= set(keys), keys
    for key in keys:
        steps = [m.step for m in client.get_metric_history(run_id, key)]
        assert sorted(steps) == sorted(set(steps)), (key, steps)
    assert len(client.get_metric_history(run_id, "reward_mean")) == 6
    tags = client.get_run(run_id).data.tags  # where each attempt ran (here: no Ray node, this host)
    host = socket.gethostname()
    assert tags["groupscale.attempt.1.host"] == tags["groupscale.attempt.2.host"] == tags["groupscale.host"] == host


def test_the_count_of_starts_is_kept_in_storage(s3_bucket):
    folder = storage.join(s3_bucket, "checkpoints", "t1")
    assert worker_starts(folder) == 0
    assert [count_start(folder) for _ in range(3)] == [1, 2, 3]
    assert worker_starts(folder) == 3 and storage.read_text(storage.join(folder, "starts")) == "3"
