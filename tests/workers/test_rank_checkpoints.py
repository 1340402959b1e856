"""A 2-process trial (gloo ranks in spawned processes) with its checkpoints on an S3 API server, killed at every
checkpoint phase of either rank (before, during and after the upload), ends with the parameters and metrics of the
trial that never stopped, bit for bit, and each step once in its MLflow run; on both engines."""

import os
import time

import pytest
import torch
from mlflow import MlflowClient

from service.stack import start_mlflow, stop_process_group
from sweeps import storage
from tests.killed_ranks import UNTIMED, attempt
from tests.ports import free_port
from tests.workers.test_engine_contract import ENGINE_SETTINGS
from tests.workers.test_trl_engine import _config, chat  # noqa: F401 - chat: the fixture

pytestmark = pytest.mark.slow  # 8 starts of 2 processes per engine: minutes on 2 cores (`make test-slow`)
T = 6
# attempt i is killed at the checkpoint of step i + 1 (a resume never passes the step of the next kill)
KILLS = [(0, "before"), (1, "during"), (0, "during"), (1, "before"), (0, "after"), (1, "after")]


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory):
    port = free_port()
    server = start_mlflow(tmp_path_factory.mktemp("mlflow"), "127.0.0.1", port)
    yield f"http://127.0.0.1:{port}"
    stop_process_group(server)


def _final_parameters(engine: str, where: str) -> dict[str, torch.Tensor]:
    from workers.checkpoint import load_checkpoint

    if engine == "groupscale":
        return load_checkpoint(where)["model"]
    from safetensors.torch import load

    return load(storage.read_bytes(storage.join(where, f"checkpoint-{T}", "model.safetensors")))


def _history(client: MlflowClient, run_id: str) -> dict[str, list[tuple[int, float]]]:
    """Each metric's (step, value) points, in step order, but those UNTIMED names."""
    keys = [k for k in client.get_run(run_id).data.metrics if not any(u in k for u in UNTIMED)]
    return {k: sorted((m.step, m.value) for m in client.get_metric_history(run_id, k)) for k in keys}


@pytest.mark.parametrize("engine", ["groupscale", "trl"])
def test_a_two_process_trial_killed_at_every_checkpoint_phase_of_either_rank_ends_as_the_uninterrupted_one(
    chat,  # noqa: F811 - the fixture
    tmp_path,
    s3_bucket,
    mlflow_uri,
    engine,
):
    client = MlflowClient(mlflow_uri)
    experiment = client.create_experiment(f"kills-{engine}-{time.monotonic_ns()}")
    runs, configs = {}, {}
    for name in ("straight", "killed"):
        where = storage.join(s3_bucket, "checkpoints", name)
        over = {**ENGINE_SETTINGS[engine], "steps": T, "checkpoint_every": 1, "checkpoint_dir": where, "num_processes": 2}
        configs[name] = _config(chat, tmp_path / name, **over).to_dict()
        runs[name] = client.create_run(experiment).info.run_id
    assert attempt(configs["straight"], str(tmp_path / "straight"), None, (mlflow_uri, runs["straight"])) == [0, 0]
    out = str(tmp_path / "killed")
    for i, (rank, phase) in enumerate(KILLS):
        codes = attempt(configs["killed"], out, (rank, phase, i + 1), (mlflow_uri, runs["killed"]))
        other = 1 - rank
        assert codes[rank] == 9 and codes[other] is not None, (rank, phase, codes)  # the other ended: no hang
        if codes[other] == 0:  # it returned: TRL's trainer turns the lost peer into a failed result instead of raising
            assert torch.load(f"{out}.{other}", weights_only=False)["status"] == "failed", (rank, phase)
            os.remove(f"{out}.{other}")  # the files read below are the last attempt's
    assert attempt(configs["killed"], out, None, (mlflow_uri, runs["killed"])) == [0, 0]
    straight, killed = (torch.load(f"{tmp_path / name}.0", weights_only=False) for name in ("straight", "killed"))
    assert killed["status"] == straight["status"] == "succeeded", killed
    timed = {k for k in straight["metrics"] if any(u in k for u in UNTIMED)}
    assert {k: v for k, v in killed["metrics"].items() if k not in timed} == {
        k: v for k, v in straight["metrics"].items() if k not in timed
    }
    ours, theirs = (_final_parameters(engine, configs[n]["checkpoint_dir"]) for n in ("killed", "straight"))
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    history, straight_history = _history(client, runs["killed"]), _history(client, runs["straight"])
    assert history == {k: straight_history[k] for k in history}  # every step once, with the uninterrupted trial's values
    # but TRL's end-of-training summary (train_loss over that start's steps): logged by a start that trains step T
    assert set(straight_history) - set(history) <= {"train_loss", "total_flos"}, sorted(straight_history)
    assert [s for s, _ in history["truncation_rate"]] == list(range(1, T + 1))  # a step metric of both engines
