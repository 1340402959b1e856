"""A trial's ranks started as processes of their own and killed at a checkpoint phase (tests/workers/test_rank_checkpoints.py):
what those processes run, importable without the test module's fixtures."""

import os
from dataclasses import asdict
from typing import Any

import torch
import torch.multiprocessing as mp

from sweeps import storage
from sweeps.trial import TrialConfig
from tests.ports import free_port

UNTIMED = ("time", "per_s", "step_time", "worker_starts", "resumed_from_step", "cuda_")  # what may differ between runs
PRELOAD = ["torch", "transformers", "trl", "workers.engines.groupscale", "workers.engines.trl", "workers.tracking"]


def _die() -> None:
    os._exit(9)  # as SIGKILL: no cleanup, no flush


def _install_kill(engine: str, rank: int, kill: tuple[int, str, int]) -> None:
    """Make rank ``kill[0]`` die at phase ``kill[1]`` of the checkpoint of step ``kill[2]``: ``before`` its part of the
    checkpoint is written, ``during`` (an upload cut half-way, an unfinished PUT; rank 1 of groupscale holds no file and
    dies while rank 0 uploads) or ``after`` the checkpoint is complete in the store (rank 1 learns it at a barrier that
    rank 0 reaches once its part is done: no read of an object being written). Installed on both ranks."""
    import torch.distributed as dist

    import sweeps.storage as store_module
    from workers.engines import groupscale, harness
    from workers.engines import trl as trl_engine

    victim, phase, step = kill
    dies, meet = victim == rank, phase == "after" and victim == 1
    now = {"step": 0}
    after_step = harness.Harness.after_step

    def track(self, s, metrics):  # noqa: ANN001, ANN202
        now["step"] = s
        after_step(self, s, metrics)

    harness.Harness.after_step = track
    upload = store_module.upload_file

    def cut_upload(local, location):  # noqa: ANN001, ANN202
        if dies and now["step"] == step and phase == "during":
            fs, path = storage.filesystem(location)
            data = open(local, "rb").read()  # noqa: SIM115
            out = fs.open_output_stream(path)
            out.write(data[: len(data) // 2])
            _die()
        upload(local, location)

    store_module.upload_file = cut_upload

    def ended(s: int) -> None:
        """After this rank's part of the checkpoint of step s."""
        if s == step and phase == "after":
            if meet:
                dist.barrier()
            if dies:
                _die()

    if engine == "trl":
        seal = trl_engine.seal  # the name the engine's callback calls

        def sealing(cfg, placement, local, s):  # noqa: ANN001, ANN202
            if dies and s == step and phase == "before":
                _die()
            seal(cfg, placement, local, s)
            ended(s)

        trl_engine.seal = sealing
    elif rank == 0:
        save = groupscale.save_checkpoint

        def saving(folder, state):  # noqa: ANN001, ANN202
            if dies and state["trial"]["step"] == step and phase == "before":
                _die()
            save(folder, state)
            ended(state["trial"]["step"])

        groupscale.save_checkpoint = saving
    else:
        gather = groupscale.all_gather

        def gathering(obj):  # noqa: ANN001, ANN202 - rank 1's part of a checkpoint: its RNG state, to rank 0
            if dies and now["step"] == step and phase == "before":
                _die()
            out = gather(obj)
            if dies and now["step"] == step and phase == "during":
                _die()
            ended(now["step"])
            return out

        groupscale.all_gather = gathering


def run_rank(
    rank: int, port: int, config: dict, out: str, kill: tuple | None, mlflow: tuple[str, str], env: dict[str, str]
) -> None:
    """Spawned: rank ``rank`` of 2 runs the trial (rank 0 logging to the MLflow run as a restarted worker does);
    ``kill``: (rank, phase, step) at which one rank dies; ``env``: the test's environment at the start (the fork server
    holds the one of its own start, which an earlier test may have made, without this test's S3 endpoint)."""
    from workers.distributed import join, leave
    from workers.engines.base import Placement
    from workers.measures import run_measure
    from workers.tracking import RunLogger

    for key in set(os.environ) - set(env):
        del os.environ[key]
    os.environ.update(env)
    torch.set_num_threads(1)
    cfg = TrialConfig(**config)
    if kill is not None:
        _install_kill(cfg.engine, rank, kill)
    join(f"tcp://127.0.0.1:{port}", Placement(rank, 2), timeout_s=120)
    report = RunLogger(*mlflow, resume=True) if rank == 0 else (lambda metrics, step: None)
    result = run_measure(cfg, report, Placement(rank, 2))
    if rank == 0:
        report.flush(final=True)
    torch.save(asdict(result), f"{out}.{rank}")
    leave()


def processes() -> Any:
    """A multiprocessing context whose processes fork from a server that has torch and the trainers imported (PRELOAD):
    a rank starts in about a second instead of the tens of seconds its imports take in a spawned process."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def attempt(config: dict, out: str, kill: tuple | None, mlflow: tuple[str, str]) -> list[int | None]:
    """One start of the trial on 2 processes; their exit codes."""
    ctx, port = processes(), free_port()
    env = dict(os.environ)  # this test's, with its S3 endpoint: the fork server's may be an earlier test's
    procs = [ctx.Process(target=run_rank, args=(r, port, config, out, kill, mlflow, env)) for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    return [p.exitcode for p in procs]
