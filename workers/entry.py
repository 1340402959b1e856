"""What Ray workers run: trials (by their measure, from MEASURES) on warm TrialWorker actors, probes, lr tunings.

Torch-free at import: the controller imports this module to launch work, and only workers import
the trainer (a TrialWorker when it starts, a probe or lr-tuning task when it runs).
"""

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
from workers.measures import MEASURES, measure_function, run_measure
from workers.progress import Report, say

SYSTEM_METRICS_EVERY_S = 5  # seconds between samples of a trial's system metrics
TITLE_EVERY_S = 0.2  # how often a busy TrialWorker sets its process title again (_keep_title)


def run_probe_task(config: dict[str, Any], probe: dict[str, Any], report: Report | None = None) -> dict[str, Any]:
    """Run the variance-component probe (workers.probe) for a spec's task and model; ``report`` hears its stages (the
    data, a model preset built on first use, the probe: workers.progress)."""
    from sweeps.spec import ProbeSpec
    from workers.batch import prepare
    from workers.probe import run_probe

    p, cfg = ProbeSpec.model_validate(probe), TrialConfig(**config)
    prepare(cfg, report)
    say(report, "probe", f"{p.prompts} prompts x {p.completions} completions ({p.prompts * p.completions} samples)")
    return run_probe(cfg.policy, p)


def run_answer_task(spec: dict[str, Any], cache_dir: str, report: Report | None = None) -> dict[str, Any]:
    """Run `groupscale answer` (workers.answers: the spec's answer.method, within its ``answer.budget`` or the default
    share of its grid); the Answer as JSON. ``report`` hears its stages (workers.progress)."""
    from sweeps.spec import SweepSpec
    from workers.answers import run_answer

    return run_answer(SweepSpec.model_validate(spec), cache_dir, report=report).model_dump(mode="json")


def check_trl_task(spec: dict[str, Any], cache_dir: str) -> dict[str, Any] | None:
    """engine trl: build the recipe's GRPOConfig for the sweep's first trial and look for the packages it names,
    where trials run (a Ray worker), at submit: what would fail every trial is refused before any is scheduled.

    Returns:
        None when the recipe builds here; else ``{"field": name or None, "message": ...}``
        (workers.engines.trl.recipe_refusal).
    """
    from sweeps.spec import SweepSpec
    from workers.engines.trl import recipe_refusal

    parsed = SweepSpec.model_validate(spec)
    cfg = TrialConfig.first_of(parsed, cache_dir)
    refusal = recipe_refusal(cfg, len(parsed.task.rewards) if parsed.task.name == "dataset" else 1)
    return None if refusal is None else {"field": refusal[0], "message": refusal[1]}


PLACEHOLDER_COMPLETION = "The answer is \\boxed{0}. #### 0"  # what the reward check scores (the common answer formats)
PLACEHOLDER_IDS = [1, 2, 3]  # its token ids, for rewards that read completion_ids (lengths)


def check_rewards_task(task: dict[str, Any], timeout_s: float, max_steps: int = 1) -> dict[str, Any] | None:
    """Import a dataset task's reward functions and call each on the first two rows of its data and the first of each
    other ``data_source`` (checked_rows) with placeholder completions, in a reward process (workers.rewards.process),
    as a trial would: run at submit on a Ray worker,
    where user code may run.

    Args:
        task: the DatasetTaskSpec's fields.
        timeout_s: how long the loading and the calls may take together.
        max_steps: the trials' T, for ``trainer_state`` (the check is a trial's first batch: global_step 0).
    Returns:
        None when every reward loads and returns one number (or None) per completion; else ``{"index": i or None,
        "message": ...}`` naming the reward and the cause (an import error with the pip command of a missing
        package, a factory's error, a wrong signature, a wrong return shape, a timeout).
    """
    from workers.data import DatasetError, is_conversational, load_rows
    from workers.rewards import RewardError, TrainerState, trl_kwargs
    from workers.rewards.process import RewardProcess, RewardTimeout

    start = time.monotonic()
    try:
        rows = checked_rows(load_rows(task["path"], task.get("split")))
    except DatasetError as e:
        return {"index": None, "message": f"the Ray workers cannot read the data: {e}"}
    column = task.get("prompt_column") or "prompt"
    prompts = [row[column] for row in rows]
    kwargs = trl_kwargs(
        prompts,
        [PLACEHOLDER_COMPLETION] * len(rows),
        [PLACEHOLDER_IDS] * len(rows),
        [{k: v for k, v in row.items() if k != column} for row in rows],
        is_conversational(prompts[0]),
        TrainerState(global_step=0, max_steps=max_steps),
    )
    try:
        process = RewardProcess(task["rewards"], timeout_s=timeout_s)
        try:
            failure = process.check(kwargs, len(rows), timeout_s=max(1.0, timeout_s - (time.monotonic() - start)))
        finally:
            process.close()
    except RewardTimeout:
        failure = RewardError(f"the reward functions were not loaded and called on {len(rows)} rows within {timeout_s:g} s")
    except RewardError as e:
        failure = e
    return None if failure is None else {"index": failure.index, "message": str(failure)}


CHECKED_SOURCES = 16  # the reward check reads the first row of at most this many data_source values


def checked_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows the reward check scores: the first two, and the first row of each other ``data_source`` (verl's
    column: a dispatcher scores each source with its own scorer, whose imports the first rows may never reach)."""
    picked, sources = list(rows[:2]), {row.get("data_source") for row in rows[:2]}
    for row in rows[2:]:
        if len(sources) >= CHECKED_SOURCES + 2:
            break
        if row.get("data_source") not in sources:
            sources.add(row.get("data_source"))
            picked.append(row)
    return picked


def _system_metrics(tracking_uri: str | None, run_id: str | None, resume: bool) -> Any:
    """This worker's system metrics on the trial's run (workers.system_metrics), one sample every
    MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL s (default SYSTEM_METRICS_EVERY_S). Started here; ``finish()`` stops it."""
    from workers.system_metrics import SystemMetrics

    monitor = SystemMetrics(run_id, tracking_uri, SYSTEM_METRICS_EVERY_S, resume=resume)
    monitor.start()
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
        if cfg.num_processes > 1:  # this process is rank 0; the others start in the trial's placement group
            from workers.ranks import run_with_ranks

            result = run_with_ranks(cfg, lambda: run_measure(cfg, report))
        else:
            result = run_measure(cfg, report)
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


def run_tune_lr(
    config: dict[str, Any],
    tune: dict[str, Any],
    tracking_uri: str | None = None,
    experiment_id: str | None = None,
    parent_run_id: str | None = None,
) -> dict[str, Any]:
    """The learning-rate tuning phase at one (G, B): workers.tune_lr.tune_learning_rate, each lr trial an MLflow run.

    Args:
        config: TrialConfig fields of the sweep's trial at this (G, B) (lr, steps and checkpoints are replaced).
        tune: ``{low, high, trials, steps}`` (TuneLRSpec; steps None: config steps // 4), optional ``seed``
            (TPE sampler, default 0), ``metric`` (default: the law's metric, gap) and ``report_every``.
        tracking_uri, experiment_id, parent_run_id: when all given, every lr trial is a child run of the
            sweep's parent run (workers.tracking.TuneRuns), ended FINISHED, KILLED (pruned) or FAILED.
    Returns:
        tune_learning_rate's plain result, each trial with its ``run_id`` (None without tracking), and ``seconds``.
    """
    from workers.tune_lr import tune_learning_rate

    start = time.perf_counter()
    cfg = TrialConfig(**config)
    runs = None
    if tracking_uri and experiment_id and parent_run_id:
        from workers.tracking import TuneRuns

        params = {
            "task": cfg.task.get("name"),
            "model": cfg.model.get("preset") or cfg.model.get("path"),
            "seed": cfg.seed,
            "optimizer": cfg.grpo.optimizer,
            "tune_lr.low": tune["low"],
            "tune_lr.high": tune["high"],
            "tune_lr.trials": tune["trials"],
        }
        runs = TuneRuns(tracking_uri, experiment_id, parent_run_id, cfg.group_size, cfg.samples_per_step, params)
    try:
        result = tune_learning_rate(
            cfg,
            float(tune["low"]),
            float(tune["high"]),
            int(tune["trials"]),
            int(tune.get("steps") or max(1, cfg.steps // 4)),
            seed=int(tune.get("seed", 0)),
            make_report=runs.start if runs else None,
            metric=tune.get("metric"),
            report_every=tune.get("report_every"),
            on_trial_end=runs.end if runs else None,
        )
    except Exception:
        if runs is not None:
            runs.abort("FAILED")
        raise
    except BaseException:  # cancelled (KeyboardInterrupt, Ray's cancellation)
        if runs is not None:
            runs.abort("KILLED")
        raise
    for t in result["trials"]:
        t["run_id"] = runs.run_ids.get(t["number"]) if runs else None
    return {**result, "seconds": time.perf_counter() - start}


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
