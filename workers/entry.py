"""The function a Ray worker runs for one trial: build the config, train, log, return plain data."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict
from typing import Any

from workers.trainer import TrialConfig, train_trial


def run_probe_task(config: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    """Run the variance-component probe (workers.probe) for a spec's task and model."""
    from workers.probe import run_probe

    return run_probe(TrialConfig(**config), probe["prompts"], probe["completions"], probe["projection_dim"], probe["seed"],
                     parameters=probe.get("parameters", "all"))  # fmt: skip


def run_trial(config: dict[str, Any], tracking_uri: str | None = None, run_id: str | None = None) -> dict[str, Any]:
    """Train one trial and return ``{status, metrics, reason, steps_done, seconds}``.

    Args:
        config: TrialConfig fields.
        tracking_uri, run_id: MLflow run to log per-step metrics into (skipped when None).
    """
    start = time.perf_counter()
    cfg = TrialConfig(**config)
    logger = None
    if tracking_uri and run_id:
        from workers.tracking import RunLogger

        logger = RunLogger(tracking_uri, run_id)
    try:
        result = train_trial(cfg, logger or (lambda m, s: None))
    except BaseException:
        if logger is not None:
            logger.flush()  # best effort: the trial's own error is the one to report
        raise
    if logger is not None:
        logger.flush(final=True)  # the trial ends only once every metric point is stored
    return {**asdict(result), "seconds": time.perf_counter() - start}


def run_tune_lr(config: dict[str, Any], tune: dict[str, Any], tracking_uri: str | None = None,
                experiment_id: str | None = None, parent_run_id: str | None = None) -> dict[str, Any]:  # fmt: skip
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

        params = {"task": cfg.task.get("name"), "model": cfg.model.get("preset") or cfg.model.get("path"), "seed": cfg.seed,
                  "optimizer": cfg.optimizer, "tune_lr.low": tune["low"], "tune_lr.high": tune["high"],
                  "tune_lr.trials": tune["trials"]}  # fmt: skip
        runs = TuneRuns(tracking_uri, experiment_id, parent_run_id, cfg.group_size, cfg.samples_per_step, params)
    try:
        result = tune_learning_rate(
            cfg, float(tune["low"]), float(tune["high"]), int(tune["trials"]), int(tune.get("steps") or max(1, cfg.steps // 4)),
            seed=int(tune.get("seed", 0)), make_report=runs.start if runs else None, metric=tune.get("metric"),
            report_every=tune.get("report_every"), on_trial_end=runs.end if runs else None,
        )  # fmt: skip
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


class TrialRunner:
    """One trial in a background thread of its own process, to be wrapped as a detached Ray actor.

    The trial starts when the object is built, so Ray's actor restart (after the worker process
    died) resumes it from its last checkpoint. ``wait`` may be called by several callers (a
    restarted controller re-attaches by calling it again), so the actor needs max_concurrency > 1.
    """

    def __init__(
        self, config: dict[str, Any], tracking_uri: str | None = None, run_id: str | None = None, name: str = "trial"
    ) -> None:
        self.name = name
        self._set_title()
        self._done = threading.Event()
        self._result: dict[str, Any] | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, args=(config, tracking_uri, run_id), name="trial", daemon=True).start()

    def _run(self, config: dict[str, Any], tracking_uri: str | None, run_id: str | None) -> None:
        try:
            self._result = run_trial(config, tracking_uri, run_id)
        except BaseException as e:  # noqa: BLE001 - handed to the caller of wait()
            self._error = e
        finally:
            self._done.set()

    def wait(self, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The trial's result (run_trial's dict), or None if it is still running after timeout_s.

        Raises:
            Exception: the trial's own exception.
        """
        self._set_title()
        if not self._done.wait(timeout_s):
            return None
        if self._error is not None:
            raise self._error
        return self._result

    def _set_title(self) -> None:
        """``ps`` shows ``ray::<name>`` (Ray titles the process after the method it last started)."""
        try:
            from ray._raylet import setproctitle  # what Ray itself titles its workers with
        except ImportError:  # not under Ray: nothing to title
            return
        setproctitle(f"ray::{self.name}")
