"""The controller is killed with SIGKILL mid-sweep and started again: the sweep completes, and each
trial ran to completion exactly once (counted in MLflow), because trials run as detached Ray actors
on a cluster of their own and the new controller re-attaches to them."""

import os
import signal
import socket
import time

import pytest
from mlflow import MlflowClient

from service.stack import start_mlflow, stop_process_group
from tests.e2e.conftest import RAY_LOOPBACK_ENV, RayHead, Stack

pytestmark = pytest.mark.e2e
STEPS = 120
SPEC = {
    "name": "e2e-restart", "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"},
    "group_sizes": [2, 4, 8], "samples_per_step": [16], "seeds": [0], "steps": STEPS, "checkpoint_every": 20,
    "eval": {"prompts": 64},
}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_sigkilled_controller_restarts_and_each_trial_runs_once(tmp_path):
    mlflow_port = _free_port()
    mlflow_proc = start_mlflow(tmp_path / "mlflow", "127.0.0.1", mlflow_port)
    head = RayHead(tmp_path)
    mlflow_uri = f"http://127.0.0.1:{mlflow_port}"
    stack = Stack(tmp_path / "controller", env={"RAY_ADDRESS": head.address, "MLFLOW_TRACKING_URI": mlflow_uri,
                                                **RAY_LOOPBACK_ENV})  # fmt: skip
    stack.data_dir.mkdir()
    try:
        stack.start()
        sid = stack.http.post("/v1/sweeps", json=SPEC).json()["id"]
        client = MlflowClient(mlflow_uri)
        deadline = time.monotonic() + 240
        while True:  # kill it once a trial is well under way
            trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
            assert not any(t["status"] == "failed" for t in trials), trials
            running = [t for t in trials if t["status"] == "running" and t["mlflow_run_id"]]
            if running and client.get_metric_history(running[0]["mlflow_run_id"], "reward_mean"):
                break
            assert time.monotonic() < deadline, trials
            time.sleep(0.5)
        os.killpg(stack.proc.pid, signal.SIGKILL)
        stack.proc.wait()
        before = len(client.get_metric_history(running[0]["mlflow_run_id"], "reward_mean"))
        time.sleep(8)
        during = len(client.get_metric_history(running[0]["mlflow_run_id"], "reward_mean"))
        assert during > before, "the trial should go on training while no controller runs"

        stack.start()  # the same data dir (store), port, Ray cluster and MLflow server
        sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"})
        assert sweep["status"] == "succeeded", sweep
        fit = stack.http.get(f"/v1/sweeps/{sid}/fit")
        assert fit.status_code == 200 and fit.json()["status"], fit.text

        trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
        assert [t["status"] for t in trials] == ["succeeded"] * 3
        assert all(t["attempts"] == 1 for t in trials), trials  # none was launched twice
        parent = sweep["mlflow"]["parent_run_id"]
        children = client.search_runs(
            [sweep["mlflow"]["experiment_id"]], f"tags.mlflow.parentRunId = '{parent}' and tags.`groupscale.kind` = 'trial'"
        )
        assert len(children) == 3  # one run per trial: nothing ran twice
        assert {r.info.run_id for r in children} == {t["mlflow_run_id"] for t in trials}
        for run in children:
            assert run.info.status == "FINISHED"
            steps = [m.step for m in client.get_metric_history(run.info.run_id, "reward_mean")]
            assert sorted(steps) == list(range(1, STEPS + 1))  # every step once: ran to completion exactly once
            assert not client.get_metric_history(run.info.run_id, "resumed_from_step")  # re-attached, not rerun
        assert client.get_run(parent).info.status == "FINISHED"
    finally:
        stack.stop()
        head.stop()
        stop_process_group(mlflow_proc)
