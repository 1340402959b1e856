"""MLflow from inside workers: the retrying client, a buffered ``report(metrics, step)`` for the trainer, the lr-search runs.

The controller creates and ends a trial's run (so it is never left RUNNING) and the trial only logs
into it; an lr search makes and ends its own child runs (TuneRuns).
Every MLflow call of groupscale, here and in service.tracking, goes through ``mlflow_call``: retries
with exponential backoff of our own for a bounded time (the MLflow client's own retries are turned
down, so the two never multiply), so that a tracking-server restart loses no metric point.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run, RunTag, ViewType
from mlflow.exceptions import MlflowException
from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS
from tenacity import before_sleep_log, retry, retry_if_exception, stop_after_delay, wait_exponential_jitter

from sweeps.finite import finite_or_none
from sweeps.planner import prompts_per_step

log = logging.getLogger("groupscale.tracking")
T = TypeVar("T")

MLFLOW_RETRY_S = float(os.environ.get("GROUPSCALE_MLFLOW_RETRY_S", "300"))  # total time one call may retry (s)


def transient_failure(e: BaseException) -> bool:
    """Server-side or connection trouble (HTTP 5xx or 429, refused, timed out), not another 4xx."""
    if isinstance(e, MlflowException):
        return e.get_http_status_code() >= 500 or e.get_http_status_code() == 429
    return isinstance(e, OSError)


def mlflow_client(tracking_uri: str) -> MlflowClient:
    """An MlflowClient whose own HTTP retries are off (``mlflow_call`` retries instead).

    MLFLOW_HTTP_REQUEST_MAX_RETRIES / _TIMEOUT keep a value the user set in the environment.
    """
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    return MlflowClient(tracking_uri)


def mlflow_call(fn: Callable[..., T], *args, retry_s: float | None = None, **kwargs) -> T:
    """Call ``fn(*args, **kwargs)``, retrying transient failures with exponential backoff
    (0.5 s doubling to 15 s, with jitter) for at most ``retry_s`` seconds (default MLFLOW_RETRY_S).

    Raises:
        MlflowException | OSError: the last failure once retry_s has passed, or at once for a 4xx other than 429.
    """
    policy = retry(
        stop=stop_after_delay(MLFLOW_RETRY_S if retry_s is None else retry_s),
        wait=wait_exponential_jitter(initial=0.5, max=15),
        retry=retry_if_exception(transient_failure),
        before_sleep=before_sleep_log(log, logging.WARNING),
        reraise=True,
    )
    return policy(fn)(*args, **kwargs)


CREATE_TAG = "groupscale.create_id"  # a run's creation request: a retry finds the run a lost answer made


class RetryingClient:
    """An MlflowClient whose every method call goes through ``mlflow_call`` (the controller's client, and the
    lr tuning's). Every write it retries is idempotent: MLflow's own are (tags, params, metrics of the same
    step and time, files), and ``create_run`` is made so here."""

    def __init__(self, tracking_uri: str, retry_s: float | None = None) -> None:
        self._client = mlflow_client(tracking_uri)
        self._retry_s = retry_s

    def __getattr__(self, name: str):
        attr = getattr(self._client, name)
        return functools.partial(mlflow_call, attr, retry_s=self._retry_s) if callable(attr) else attr

    def create_run(self, experiment_id: str, run_name: str | None = None, tags: dict[str, str] | None = None) -> Run:
        """MlflowClient.create_run, once: the run is tagged with a new CREATE_TAG, and a retry first looks for a run
        of that tag (the server made it, but its answer was lost), so one request never makes two runs."""
        key, tried = uuid.uuid4().hex, []
        tags = {**(tags or {}), CREATE_TAG: key}

        def attempt() -> Run:
            if tried:
                made = self._client.search_runs([experiment_id], f"tags.`{CREATE_TAG}` = '{key}'", ViewType.ALL, 1)
                if made:
                    return made[0]
            tried.append(key)
            return self._client.create_run(experiment_id, run_name=run_name, tags=tags)

        return mlflow_call(attempt, retry_s=self._retry_s)


class RunLogger:
    """Buffers metric points and sends them with log_batch every ``flush_every`` points.

    A batch leaves the buffer only once the server has taken it: when MLflow stays down past the
    retry bound, an intermediate flush keeps the points for the next one (training goes on); the
    final ``flush(final=True)`` raises instead.
    """

    def __init__(self, tracking_uri: str, run_id: str, flush_every: int = 500, resume: bool = False) -> None:
        """With ``resume`` (a trial continuing from its checkpoint), points of steps the run already holds
        for a key are not sent again: the steps redone since the checkpoint keep one point each."""
        self.client = mlflow_client(tracking_uri)
        self.run_id = run_id
        self.flush_every = flush_every
        self._buffer: list[Metric] = []
        self._logged: dict[str, int] = {}  # key -> last step the run already holds
        if resume:
            keys = mlflow_call(self.client.get_run, run_id).data.metrics
            for key in keys:
                history = mlflow_call(self.client.get_metric_history, run_id, key)
                self._logged[key] = max((m.step for m in history), default=-1)

    def __call__(self, metrics: dict[str, float], step: int) -> None:
        now = int(time.time() * 1000)
        self._buffer += [
            Metric(k, float(v), now, step)
            for k, v in metrics.items()
            if math.isfinite(float(v)) and step > self._logged.get(k, -1)
        ]
        if len(self._buffer) >= self.flush_every:
            self.flush()

    def log_table(self, rows: list[dict], artifact_file: str = "samples.json") -> None:
        """rows (one dict each; a key some rows lack is None there, a non-finite number null) as an MLflow table
        artifact: the JSON MlflowClient.log_table writes ({"columns", "data"}) and its ``mlflow.loggedArtifacts`` tag,
        which the UI reads. Written whole, so that a retried upload replaces the file (log_table appends to an
        existing artifact: a retry after a lost answer doubled the rows) and values keep their types (log_table
        goes through pandas, which read "1" back as 1)."""
        keys = list(dict.fromkeys(key for row in rows for key in row))
        data = [[finite_or_none(row.get(key)) for key in keys] for row in rows]
        text = json.dumps({"columns": keys, "data": data}, allow_nan=False)
        mlflow_call(self.client.log_text, self.run_id, text, artifact_file)
        tags = json.loads(mlflow_call(self.client.get_run, self.run_id).data.tags.get(MLFLOW_LOGGED_ARTIFACTS, "[]"))
        entry = {"path": artifact_file, "type": "table"}
        if entry not in tags:
            mlflow_call(self.client.set_tag, self.run_id, MLFLOW_LOGGED_ARTIFACTS, json.dumps([*tags, entry]))

    def log_params(self, params: dict[str, str]) -> None:
        """Params of the trial's run (MLflow takes 100 a call; logging one again with the same value is a no-op)."""
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            mlflow_call(self.client.log_batch, self.run_id, params=items[i : i + 100])

    def set_tags(self, tags: dict[str, str]) -> None:
        """Tags on the trial's run (values cut to MLflow's 5000 characters)."""
        mlflow_call(self.client.log_batch, self.run_id, tags=[RunTag(k, str(v)[:5000]) for k, v in tags.items()])

    def flush(self, final: bool = False) -> None:
        """Send the buffered points. An intermediate flush tries once and, when MLflow is away, keeps the points for the
        next one: training goes on meanwhile (retrying here paused a trial for a minute while `up` restarted). The
        final flush retries for MLFLOW_RETRY_S, then raises: the trial ends only once every point is stored."""
        while self._buffer:  # log_batch takes at most 1000 metrics per call
            chunk = self._buffer[:1000]
            try:
                mlflow_call(self.client.log_batch, self.run_id, metrics=chunk, retry_s=None if final else 0)
            except Exception:
                if final:
                    raise
                log.warning("MLflow unreachable; %d metric points kept for the next flush", len(self._buffer), exc_info=True)
                return
            del self._buffer[: len(chunk)]


TUNE_RUN_STATUS = {"COMPLETE": "FINISHED", "PRUNED": "KILLED", "FAIL": "FAILED"}  # Optuna trial state -> run status


class TuneRuns:
    """The learning-rate tuning phase in MLflow: one child run of the sweep's parent run per lr trial.

    Unlike a sweep trial's run, these are created and ended here, in the worker (how many trials run,
    and how far, is decided by the study inside it). Each run has the tags ``mlflow.parentRunId``,
    ``groupscale.phase=tune_lr``, ``groupscale.group_size`` and ``groupscale.samples_per_step``, the
    param ``lr``, the trainer's per-step metrics (through a RunLogger), the pruner's intermediate
    values and the final ``tune_lr.value``; it ends FINISHED (complete), KILLED (pruned) or FAILED.
    ``abort`` ends every run still open, so that none is left RUNNING when the tuning itself stops.
    """

    def __init__(
        self,
        tracking_uri: str,
        experiment_id: str,
        parent_run_id: str,
        group_size: int,
        samples_per_step: int,
        params: dict | None = None,
    ) -> None:
        self.uri, self.experiment_id, self.parent_run_id = tracking_uri, experiment_id, parent_run_id
        self.group_size, self.samples_per_step = group_size, samples_per_step
        self.params = params or {}
        self.client = RetryingClient(tracking_uri)
        self.loggers: dict[int, RunLogger] = {}  # open runs by Optuna trial number
        self.run_ids: dict[int, str] = {}

    def start(self, number: int, lr: float) -> RunLogger:
        """Create trial ``number``'s child run (tags, params) and return the report that logs into it."""
        g, b = self.group_size, self.samples_per_step
        tags = {
            "mlflow.parentRunId": self.parent_run_id,
            "groupscale.phase": "tune_lr",
            "groupscale.kind": "tune_lr",
            "groupscale.group_size": str(g),
            "groupscale.samples_per_step": str(b),
            "groupscale.optuna_trial": str(number),
        }
        run = self.client.create_run(self.experiment_id, run_name=f"tune_lr G={g} B={b} #{number} lr={lr:.3g}", tags=tags)
        run_id = run.info.run_id
        params = {
            **self.params,
            "lr": lr,
            "group_size": g,
            "samples_per_step": b,
            "prompts_per_step": prompts_per_step(b, g),
            "optuna_trial": number,
        }
        self.client.log_batch(run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
        self.run_ids[number] = run_id
        self.loggers[number] = logger = RunLogger(self.uri, run_id)
        return logger

    def end(self, trial: dict) -> None:
        """Flush trial's metrics, log its value and state, and end its run (a workers.tune_lr trial dict)."""
        logger = self.loggers.pop(trial["number"], None)
        if logger is None:
            return
        logger.flush(final=True)
        now = int(time.time() * 1000)
        metrics = [Metric("tune_lr.value", float(trial["value"]), now, trial["steps_done"])] if trial["value"] is not None else []
        tags = [RunTag("groupscale.status", trial["state"])]
        if trial.get("reason"):
            tags.append(RunTag("groupscale.reason", str(trial["reason"])[:5000]))
        self.client.log_batch(logger.run_id, metrics=metrics, tags=tags)
        self.client.set_terminated(logger.run_id, TUNE_RUN_STATUS.get(trial["state"], "FAILED"))

    def abort(self, status: str = "FAILED") -> None:
        """End every run still open with ``status`` (best effort: the tuning's own error is the one to report)."""
        for number in list(self.loggers):
            logger = self.loggers.pop(number)
            try:
                logger.flush()
                self.client.set_tag(logger.run_id, "groupscale.status", status)
                self.client.set_terminated(logger.run_id, status)
            except Exception:  # noqa: BLE001
                log.warning("could not end tune_lr run %s", logger.run_id, exc_info=True)
