"""A sweep on a Ray cluster of three nodes on this host (tests.cluster), with checkpoints and resume state on an S3 API
server (GROUPSCALE_STORAGE_URI): a shape no node holds, and a node lost for good mid-sweep."""

import time

import pytest
from mlflow import MlflowClient

from sweeps import storage
from tests.cluster import LocalCluster
from tests.e2e.conftest import Stack
from tests.factories import bandit_spec

STEPS = 6000  # a bandit trial of about a minute here
RESTART_S = 30.0  # the lost trial starts again on another node within this long of the loss (DESIGN, issue 41)


def _node_of(client: MlflowClient, run_id: str | None, attempt: int) -> str | None:
    """The Ray node id attempt ``attempt`` of a trial ran on (workers.worker.attempt_tags), None before it starts."""
    return client.get_run(run_id).data.tags.get(f"groupscale.attempt.{attempt}.node_id") if run_id else None


@pytest.mark.slow
@pytest.mark.parametrize("comes_back", [False, True], ids=["never-back", "a-node-comes-back"])
def test_a_node_lost_mid_sweep_restarts_its_trial_elsewhere_from_s3_and_logs_each_step_once(tmp_path, s3_bucket, comes_back):
    """Three 1-CPU nodes, each with a warm worker (GROUPSCALE_WARM_WORKERS=3); two trials take two of them, the third
    idles. The node of one trial is SIGKILLed and never comes back (or a fresh node joins 2 s later): Ray restarts its
    worker only where a CPU is free, which the idle worker holds, so the controller must stop that worker at once
    (before: after GROUPSCALE_WORKER_IDLE_S, 300 s). The restarted worker, on a node that never saw the lost node's
    disk, resumes the trial from the S3 server's checkpoint, and the trial's run holds each step once."""
    cluster = LocalCluster(tmp_path, nodes=3, cpus=1)
    env = {"RAY_ADDRESS": cluster.address, "GROUPSCALE_STORAGE_URI": s3_bucket, "GROUPSCALE_WARM_WORKERS": "3"}
    (tmp_path / "stack").mkdir()
    stack = Stack(tmp_path / "stack", env)
    try:
        stack.start()
        too_big = stack.http.post("/v1/sweeps", json=bandit_spec(resources={"cpus_per_trial": 2}))  # 3 CPUs, 1 a node
        assert too_big.status_code == 422, too_big.text
        assert "its largest node has 1 CPU" in too_big.json()["detail"][0]["msg"]
        spec = bandit_spec(name="node-loss", group_sizes=[2, 4], steps=STEPS, checkpoint_every=250, eval={"prompts": 16})
        sid = stack.http.post("/v1/sweeps", json=spec).json()["id"]
        client = MlflowClient(stack.mlflow_uri)
        deadline = time.monotonic() + 300
        while True:  # a trial off the head node has written a checkpoint to the S3 server
            trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
            off_head = [
                (t, cluster.node_ids.index(node))
                for t in trials
                if t["status"] == "running" and (node := _node_of(client, t["mlflow_run_id"], 1)) in cluster.node_ids[1:]
            ]
            ready = [
                (t, i) for t, i in off_head if storage.exists(storage.join(s3_bucket, "checkpoints", t["id"], "checkpoint.pt"))
            ]
            if ready:
                break
            assert time.monotonic() < deadline, (trials, cluster.node_ids)
            time.sleep(0.5)
        lost, index = ready[0]
        cluster.kill(index)
        killed_at = time.monotonic()
        if comes_back:
            time.sleep(2)
            cluster.add()
        while (node := _node_of(client, lost["mlflow_run_id"], 2)) is None:
            assert time.monotonic() - killed_at < 120, stack.http.get(f"/v1/sweeps/{sid}/trials").json()
            time.sleep(0.5)
        restarted_s = time.monotonic() - killed_at
        print(f"the lost trial started again on node {node[:8]} {restarted_s:.1f} s after its node died")
        assert node != cluster.node_ids[index] and node in cluster.node_ids, node
        sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"}, timeout_s=600)
        assert sweep["status"] == "succeeded", sweep
        for t in stack.http.get(f"/v1/sweeps/{sid}/trials").json():
            run_id = t["mlflow_run_id"]
            for key in ("reward_mean", "gap"):
                steps = [m.step for m in client.get_metric_history(run_id, key)]
                assert len(steps) == len(set(steps)), (t["id"], key, len(steps) - len(set(steps)))
            assert len(client.get_metric_history(run_id, "reward_mean")) == STEPS
        resumed = [m.value for m in client.get_metric_history(lost["mlflow_run_id"], "resumed_from_step")]
        assert resumed and resumed[-1] >= 250, resumed  # from the S3 server's checkpoint, not from step 0
        assert restarted_s < RESTART_S, f"the lost trial started again {restarted_s:.1f} s after its node died"
        assert any(n.startswith("worker-") for n in cluster.named_actors("groupscale"))  # idle, warm
        stack.stop()  # a clean stop: its idle detached workers no longer hold the shared cluster's CPUs
        assert [n for n in cluster.named_actors("groupscale") if n.startswith("worker-")] == []
    finally:
        stack.stop()
        cluster.stop()
