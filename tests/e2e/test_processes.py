"""A sweep whose trials run on 2 processes (resources.num_processes: 2) through the real stack: each trial a Ray
placement group of 2 bundles, its ranks in one gloo process group, one MLflow run per trial with world_size 2; a rank
killed mid-trial brings the trial back from its checkpoint with every step logged once."""

import os
import signal
import subprocess
import time

import pytest
from mlflow import MlflowClient

from tests.factories import spec

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # two processes per trial: most of this machine's 2 cores for minutes
SQLITE_ONLY = pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
STEPS, EVERY = 80, 10


def rank_pids() -> list[int]:
    """The processes of ranks 1.. (workers.ranks.RankWorker) running a trial now, as ps shows them."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [int(line.split(None, 1)[0]) for line in out.splitlines() if "ray::RankWorker" in line]


@SQLITE_ONLY
def test_a_two_process_sweep_logs_one_run_per_trial_and_survives_a_killed_rank(stack):
    body = spec(
        name="e2e-processes",
        group_sizes=[2, 4],
        steps=STEPS,
        checkpoint_every=EVERY,
        eval={"prompts": 32, "every": 0},
        resources={"num_processes": 2},
    )
    r = stack.http.post("/v1/sweeps", json=body)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    deadline = time.monotonic() + 300
    while True:  # the first trial has a checkpoint and its rank 1 runs: then rank 1 is killed
        trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
        running = [t for t in trials if t["status"] == "running"]
        if running and (stack.data_dir / "checkpoints" / running[0]["id"] / "checkpoint.pt").exists() and rank_pids():
            break
        assert time.monotonic() < deadline and not any(t["status"] == "failed" for t in trials), trials
        time.sleep(0.2)
    (pid,) = rank_pids()
    os.kill(pid, signal.SIGKILL)
    sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"})
    assert sweep["status"] == "succeeded", sweep
    trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
    assert sorted(t["group_size"] for t in trials) == [2, 4] and {t["status"] for t in trials} == {"succeeded"}, trials

    client = MlflowClient(stack.mlflow_uri)
    parent = sweep["mlflow"]["parent_run_id"]
    children = client.search_runs([sweep["mlflow"]["experiment_id"]], filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    assert len(children) == 2  # one run per trial, not one per process
    resumed = []
    for child in children:
        assert child.info.status == "FINISHED" and child.data.params["world_size"] == "2"
        steps = [m.step for m in client.get_metric_history(child.info.run_id, "reward_mean")]
        assert sorted(steps) == list(range(1, STEPS + 1))  # every step once: rank 0 alone logs, a resume skips none
        resumed += client.get_metric_history(child.info.run_id, "resumed_from_step")
    (point,) = resumed  # the trial whose rank was killed came back from a checkpoint, with new ranks
    assert point.value > 0 and point.value % EVERY == 0
