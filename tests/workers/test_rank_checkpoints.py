"""A 2-process trial (gloo ranks in spawned processes) with its checkpoints on an S3 API server, killed at every
checkpoint phase of either rank (before, during and after the upload), ends with the parameters and metrics of the
trial that never stopped, bit for bit, and each step once in its MLflow run; on both engines."""

import os
import time
from dataclasses import asdict

import pytest
import torch
import torch.multiprocessing as mp
from mlflow import MlflowClient

from service.stack import start_mlflow, stop_process_group
from sweeps import storage
from sweeps.trial import TrialConfig
from tests.ports import free_port
from tests.workers.test_engine_contract import ENGINE_SETTINGS, STEP_KEY
from tests.workers.test_trl_engine import _config, chat  # noqa: F401 - chat: the fixture

pytestmark = pytest.mark.slow  # 8 starts of 2 processes per engine: minutes on 2 cores (`make test-slow`)
T = 6
# attempt i is killed at the checkpoint of step i + 1 (a resume never passes the step of the next kill)
KILLS = [(0, "before"), (1, "during"), (0, "during"), (1, "before"), (0, "after"), (1, "after")]
UNTIMED = ("time", "per_s", "step_time", "worker_starts", "resumed_from_step", "cuda_")  # what may differ between runs


def _die() -> None:
    os._exit(9)  # as SIGKILL: no cleanup, no flush


def _install_kill(engine: str, rank: int, phase: str, step: int, where: str) -> None:
    """Make this process die at ``phase`` of the checkpoint of ``step``: ``before`` its part of the checkpoint is
    written, ``during`` (an upload cut half-way: an unfinished PUT; rank 1 of groupscale holds no file and dies while
    rank 0 uploads) or ``after`` the checkpoint is complete in the store."""
    import sweeps.storage as store_module
    from workers import checkpoint
    from workers.engines import groupscale, harness, trl_checkpoints

    now = {"step": 0}
    after_step = harness.Harness.after_step

    def track(self, s, metrics):  # noqa: ANN001, ANN202
        now["step"] = s
        after_step(self, s, metrics)

    harness.Harness.after_step = track
    upload = store_module.upload_file

    def cut_upload(local, location):  # noqa: ANN001, ANN202
        if now["step"] == step and phase == "during":
            fs, path = storage.filesystem(location)
            data = open(local, "rb").read()  # noqa: SIM115
            out = fs.open_output_stream(path)
            out.write(data[: len(data) // 2])
            _die()
        upload(local, location)

    store_module.upload_file = cut_upload

    def complete() -> bool:
        if engine == "trl":
            return step in trl_checkpoints.sealed_steps(where)
        saved = checkpoint.load_checkpoint(where)
        return saved is not None and saved["trial"]["step"] == step

    def wait_complete_then_die() -> None:
        while not complete():
            time.sleep(0.05)
        _die()

    if engine == "trl":
        seal = trl_checkpoints.seal

        def sealing(cfg, placement, local, s):  # noqa: ANN001, ANN202
            if s == step and phase == "before":
                _die()
            seal(cfg, placement, local, s)
            if s == step and phase == "after":
                wait_complete_then_die()

        trl_checkpoints.seal = sealing
    elif rank == 0:
        save = groupscale.save_checkpoint

        def saving(folder, state):  # noqa: ANN001, ANN202
            if state["trial"]["step"] == step and phase == "before":
                _die()
            save(folder, state)
            if state["trial"]["step"] == step and phase == "after":
                _die()

        groupscale.save_checkpoint = saving
    else:
        gather = groupscale.all_gather

        def gathering(obj):  # noqa: ANN001, ANN202 - rank 1's part of a checkpoint: its RNG state, to rank 0
            if now["step"] == step and phase == "before":
                _die()
            out = gather(obj)
            if now["step"] == step:
                _die() if phase == "during" else wait_complete_then_die()
            return out

        groupscale.all_gather = gathering


def _rank(rank: int, port: int, config: dict, out: str, kill: tuple | None, mlflow: tuple[str, str]) -> None:
    """Spawned: rank ``rank`` of 2 runs the trial (rank 0 logging to the MLflow run as a restarted worker does);
    ``kill``: (rank, phase, step) at which one rank dies."""
    from workers.distributed import join, leave
    from workers.engines.base import Placement
    from workers.measures import run_measure
    from workers.tracking import RunLogger

    torch.set_num_threads(1)
    cfg = TrialConfig(**config)
    if kill is not None and kill[0] == rank:
        _install_kill(cfg.engine, rank, kill[1], kill[2], str(cfg.checkpoint_dir))
    join(f"tcp://127.0.0.1:{port}", Placement(rank, 2), timeout_s=120)
    report = RunLogger(*mlflow, resume=True) if rank == 0 else (lambda metrics, step: None)
    result = run_measure(cfg, report, Placement(rank, 2))
    if rank == 0:
        report.flush(final=True)
    torch.save(asdict(result), f"{out}.{rank}")
    leave()


def _attempt(config: dict, out: str, kill: tuple | None, mlflow: tuple[str, str]) -> list[int | None]:
    ctx, port = mp.get_context("spawn"), free_port()
    procs = [ctx.Process(target=_rank, args=(r, port, config, out, kill, mlflow)) for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    return [p.exitcode for p in procs]


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
    assert _attempt(configs["straight"], str(tmp_path / "straight"), None, (mlflow_uri, runs["straight"])) == [0, 0]
    out = str(tmp_path / "killed")
    for i, (rank, phase) in enumerate(KILLS):
        codes = _attempt(configs["killed"], out, (rank, phase, i + 1), (mlflow_uri, runs["killed"]))
        assert codes[rank] == 9 and codes[1 - rank] not in (0, None), (rank, phase, codes)  # the other raised: no hang
    assert _attempt(configs["killed"], out, None, (mlflow_uri, runs["killed"])) == [0, 0]
    straight, killed = (torch.load(f"{tmp_path / name}.0", weights_only=False) for name in ("straight", "killed"))
    assert killed["status"] == straight["status"] == "succeeded", killed
    timed = {k for k in straight["metrics"] if any(u in k for u in UNTIMED)}
    assert {k: v for k, v in killed["metrics"].items() if k not in timed} == {
        k: v for k, v in straight["metrics"].items() if k not in timed
    }
    ours, theirs = (_final_parameters(engine, configs[n]["checkpoint_dir"]) for n in ("killed", "straight"))
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    history = _history(client, runs["killed"])
    assert history == _history(client, runs["straight"])  # every step once, with the uninterrupted trial's values
    assert [s for s, _ in history[STEP_KEY[engine]]] == list(range(1, T + 1))
