"""The TrialWorker: a warm worker process that runs trials one after another (a detached, named Ray actor), and the run
of one trial in it (run_trial: its MLflow run, its system metrics, this process's placement as rank 0, its ranks).
Torch-free at import: the controller imports it (through workers.entry); a worker imports the trainer as it starts."""

from __future__ import annotations

import importlib
import json
import os
import socket
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sweeps import storage
from sweeps.trial import TrialConfig
from workers.checkpoint import has_checkpoint
from workers.engines.base import Placement
from workers.measures import MEASURES, measure_function, run_measure

SYSTEM_METRICS_EVERY_S = 5  # seconds between samples of a trial's system metrics
TITLE_EVERY_S = 0.2  # how often a busy TrialWorker sets its process title again (_keep_title)


def _system_metrics(tracking_uri: str | None, run_id: str | None, resume: bool) -> Any:
    """This worker's system metrics on the trial's run (workers.system_metrics), one sample every
    MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL s (default SYSTEM_METRICS_EVERY_S). Started here; ``finish()`` stops it."""
    from workers.system_metrics import SystemMetrics

    (monitor := SystemMetrics(run_id, tracking_uri, SYSTEM_METRICS_EVERY_S, resume=resume)).start()
    return monitor


def attempt_tags(attempt: int) -> dict[str, str]:
    """The MLflow tags saying where attempt ``attempt`` (1 for the first start) of a trial runs: its Ray node's id (in
    a Ray worker) and host, as ``groupscale.attempt.<n>.node_id`` / ``.host`` and as the run's latest
    ``groupscale.node_id`` / ``groupscale.host``."""
    import ray

    where = {"host": socket.gethostname()}
    if ray.is_initialized():
        where["node_id"] = ray.get_runtime_context().get_node_id()
    return {f"groupscale.attempt.{attempt}.{k}": v for k, v in where.items()} | {f"groupscale.{k}": v for k, v in where.items()}


def run_trial(
    config: dict[str, Any], tracking_uri: str | None = None, run_id: str | None = None, worker_starts: int = 1
) -> dict[str, Any]:
    """Run one trial (its measure) and return ``{status, metrics, reason, steps_done, seconds}``.

    Args:
        config: TrialConfig fields.
        tracking_uri, run_id: MLflow run to log per-step metrics into (skipped when None).
        worker_starts: how many times a worker process started this trial since its launch (1 + Ray's
            restarts); logged as the metric ``worker_starts`` when above 1.
    """
    start = time.perf_counter()
    cfg = TrialConfig(**config)
    logger = None
    if tracking_uri and run_id:
        from workers.tracking import RunLogger

        resume = has_checkpoint(cfg.checkpoint_dir) or worker_starts > 1
        # the steps the run already holds are read on every start, not only from a checkpoint: a resume from an older
        # checkpoint, or from none (a node's disk lost with it), logs no step twice (the run was made a moment ago)
        logger = RunLogger(tracking_uri, run_id, resume=True)
        logger.set_tags(attempt_tags(worker_starts))
        if worker_starts > 1:
            logger({"worker_starts": float(worker_starts)}, 0)
    monitor = _system_metrics(tracking_uri, run_id, resume) if logger is not None else None
    try:
        report = logger or (lambda m, s: None)
        placement = Placement(0, cfg.num_processes, cfg.device)  # this process is rank 0: its role, decided here once
        if cfg.num_processes > 1:  # the other ranks start in the trial's placement group
            from workers.ranks import run_with_ranks

            result = run_with_ranks(cfg, placement, lambda: run_measure(cfg, report, placement))
        else:
            result = run_measure(cfg, report, placement)
    except BaseException:
        if logger is not None:
            logger.flush()  # best effort: the trial's own error is the one to report
        raise
    finally:
        if monitor is not None:
            monitor.finish()
    if logger is not None:
        logger.flush(final=True)  # the trial ends only once every metric point is stored
    return {**asdict(result), "seconds": time.perf_counter() - start}


def worker_starts(checkpoint_dir: str | Path) -> int:
    """How many times a worker process started the trial whose checkpoints are in ``checkpoint_dir``
    (``<checkpoint_dir>/starts``, written by count_start; a sweeps.storage location); 0 when none did. The controller
    reads it to report Ray's restarts."""
    try:
        return int(storage.read_text(storage.join(checkpoint_dir, "starts")) or 0)
    except (OSError, ValueError):
        return 0


def count_start(checkpoint_dir: str | None) -> int:
    """Add one to the trial's count of worker starts (see worker_starts) and return it; 1 without a
    checkpoint folder."""
    if not checkpoint_dir:
        return 1
    starts = worker_starts(checkpoint_dir) + 1
    storage.write_text(storage.join(checkpoint_dir, "starts"), str(starts))
    return starts


class TrialWorker:
    """A warm worker process that runs trials one after another, to be wrapped as a detached Ray actor.

    torch, transformers and the trainer stay imported between trials, so a sweep's trials after the
    first start in milliseconds instead of seconds (a new process, its imports and Ray's actor start).
    The trial being run is written to ``<state_dir>/<name>.json`` (with the worker's pid) when it starts
    and marked done when it ends, so Ray's restart of the actor (after its process died) resumes that
    trial from its last checkpoint, and the controller's pending ``run`` call, retried on the restarted
    actor, waits for it.
    Calls run in threads (max_concurrency > 1): ``current`` answers while a trial runs.
    """

    def __init__(self, state_dir: str, name: str) -> None:
        for kind in MEASURES:  # imported once, at the worker's start, not inside a trial's timed run
            measure_function(kind)
        importlib.import_module("workers.tracking")  # MLflow's client, which every logged trial uses
        importlib.import_module("workers.system_metrics")  # and the system metrics
        self.name = name
        self._state = storage.join(state_dir, f"{name}.json")  # sweeps.storage: every node reaches it
        self._lock = threading.Condition()
        self._trial: str | None = None
        self._done = threading.Event()
        self._result: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._set_title()
        text = storage.read_text(self._state)
        saved = json.loads(text) if text else None
        if saved and not saved.get("done"):  # restarted by Ray mid-trial: resume it from its checkpoint
            self._start(saved["trial"], saved["args"])

    def _start(self, trial: str, args: list) -> None:
        self._trial, self._result, self._error = trial, None, None
        self._done.clear()
        self._save(trial, args, done=False)
        self._set_title()
        config, uri, run_id = args
        starts = count_start(config.get("checkpoint_dir"))
        threading.Thread(target=self._run, args=(trial, args, starts), name="trial", daemon=True).start()
        threading.Thread(target=self._keep_title, name="title", daemon=True).start()

    def _keep_title(self) -> None:
        """Set the title again every TITLE_EVERY_S while the trial runs: Ray sets the process title back
        to the actor's class name when any call (``current``, from the controller) returns."""
        while not self._done.wait(TITLE_EVERY_S):
            self._set_title()
        self._set_title()

    def _run(self, trial: str, args: list, starts: int) -> None:
        config, uri, run_id = args
        try:
            self._result = run_trial(config, uri, run_id, starts)
        except BaseException as e:  # noqa: BLE001 - handed to the caller of run()
            self._error = e
        finally:
            self._save(trial, args, done=True)
            self._done.set()

    def run(
        self, trial: str, config: dict[str, Any] | None = None, tracking_uri: str | None = None, run_id: str | None = None
    ) -> dict[str, Any]:
        """Run ``trial`` (unless it is the one already running here) and return its result (run_trial's
        dict). Without ``config``: attach to the trial this worker runs (a restarted controller).

        Raises:
            Exception: the trial's own exception.
            LookupError: attach to a trial this worker does not run; or a start while another trial runs.
        """
        with self._lock:
            if self._trial != trial:
                if config is None:
                    raise LookupError(f"worker {self.name} runs {self._trial}, not {trial}")
                if self._trial is not None and not self._done.is_set():
                    raise LookupError(f"worker {self.name} is busy with {self._trial}")
                self._start(trial, [config, tracking_uri, run_id])
        self._set_title()
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def current(self) -> tuple[str | None, bool]:
        """(the trial this worker runs or last ran, whether it has ended)."""
        self._set_title()
        return self._trial, self._done.is_set()

    def _save(self, trial: str, args: list, done: bool) -> None:
        storage.write_text(self._state, json.dumps({"trial": trial, "args": args, "done": done, "pid": os.getpid()}))

    def _set_title(self) -> None:
        """``ps`` shows ``ray::trial-<id>`` while a trial runs here, ``ray::<worker name>`` otherwise (Ray
        titles the process after each call it starts and ends, so every method and _keep_title set it again;
        the state file's pid is the exact way to find the process)."""
        try:
            from ray._raylet import setproctitle  # what Ray itself titles its workers with
        except ImportError:  # not under Ray: nothing to title
            return
        busy = self._trial is not None and not self._done.is_set()
        setproctitle(f"ray::{self._trial}" if busy else f"ray::{self.name}")
