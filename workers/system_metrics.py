"""A trial's system metrics (CPU, memory, disk, network, GPU) on its MLflow run, kept through MLflow outages.

MLflow's own SystemMetricsMonitor ends for good at its first failed request (a get_run or a log_batch), so a
20-second MLflow restart lost the rest of a trial's system metrics without a word. ``SystemMetrics`` samples with
MLflow's monitors but keeps what it could not send and sends it, in step order, once MLflow answers again.
"""

from __future__ import annotations

import logging
import time

from mlflow.entities import Metric
from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

from workers.tracking import mlflow_call, mlflow_client, transient_failure

log = logging.getLogger("groupscale.tracking")
MAX_KEPT = 100_000  # metric points kept while MLflow is down (about 9 hours of 5-s samples); the oldest go first
FINAL_RETRY_S = 60.0  # how long finish() retries sending what is left


class SystemMetrics(SystemMetricsMonitor):
    """MLflow's system metrics of this process's machine on run ``run_id``, one sample every ``sampling_interval`` s
    (MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL overrides it), as ``system/<name>`` at steps 0, 1, ... (after the
    run's last system step when ``resume``).

    Points MLflow does not take (a transient failure: 5xx, 429, a refused or timed-out connection) are kept, at most
    MAX_KEPT, and sent with the next sample; a warning says when MLflow stopped answering and when it came back.
    A permanent refusal (a 4xx: the run was deleted) ends the sampling with a warning. ``start()`` starts the
    sampling thread; ``finish()`` stops it and sends what is left, retrying for FINAL_RETRY_S.

    Raises (constructor, with ``resume``): MlflowException or OSError when the run cannot be read within
    workers.tracking.MLFLOW_RETRY_S.
    """

    def __init__(self, run_id: str, tracking_uri: str, sampling_interval: float, resume: bool = False) -> None:
        self._client = mlflow_client(tracking_uri)
        self._kept: list[Metric] = []
        self._down_since: float | None = None
        super().__init__(run_id, sampling_interval=sampling_interval, resume_logging=resume, tracking_uri=tracking_uri)

    def _get_next_logging_step(self, run_id: str) -> int:
        """The step after the run's last system metric (MLflow's own answers 0 on any failed request: a resumed
        trial would log its steps again from 0)."""
        run = mlflow_call(self._client.get_run, run_id)
        steps = [m.step for m in run.data._metric_objs if m.key.startswith(self._metrics_prefix)]
        return max(steps, default=-1) + 1

    def monitor(self) -> None:
        """The sampling thread: sample, keep, send; until finish() or a permanent refusal."""
        while not self._shutdown_event.is_set():
            for _ in range(self.samples_before_logging):
                self.collect_metrics()
                if self._shutdown_event.wait(self.sampling_interval):
                    break
            self.publish_metrics(self.aggregate_metrics())
            if not self._send():
                return

    def publish_metrics(self, metrics: dict[str, float]) -> None:
        """Keep one aggregated sample as points of the next step (sent by _send)."""
        prefix = self._metrics_prefix + (self.node_id + "/" if self.node_id else "")
        now = int(time.time() * 1000)
        self._kept += [Metric(prefix + k, float(v), now, self._logging_step) for k, v in metrics.items()]
        self._logging_step += 1
        for monitor in self.monitors:
            monitor.clear_metrics()
        if len(self._kept) > MAX_KEPT:
            log.warning("MLflow down for long: the oldest %d system-metric points are dropped", len(self._kept) - MAX_KEPT)
            del self._kept[: len(self._kept) - MAX_KEPT]

    def _send(self, retry_s: float = 0.0) -> bool:
        """Send the kept points (log_batch, 1000 at most per call), retrying for ``retry_s``. True when they were
        sent or MLflow is down for now (they stay kept); False on a permanent refusal."""
        while self._kept:
            chunk = self._kept[:1000]
            try:
                mlflow_call(self._client.log_batch, self._run_id, metrics=chunk, retry_s=retry_s)
            except Exception as e:  # noqa: BLE001 - MLflow trouble must not end the trial
                if not transient_failure(e):
                    log.warning("MLflow refused the system metrics of run %s; no more are sent: %s", self._run_id, e)
                    return False
                if self._down_since is None:
                    self._down_since = time.monotonic()
                    log.warning("MLflow does not answer; system metrics are kept and sent once it does: %s", e)
                return True
            del self._kept[: len(chunk)]
        if self._down_since is not None:
            log.warning(
                "MLflow answers again after %.0f s; the kept system metrics were sent", time.monotonic() - self._down_since
            )
            self._down_since = None
        return True

    def finish(self) -> None:
        """Stop sampling and send what is left (retrying for FINAL_RETRY_S; what MLflow still refuses is lost, with a word)."""
        self._shutdown_event.set()
        if self._process is not None:
            self._process.join()
            self._process = None
        if self._kept and self._send(retry_s=FINAL_RETRY_S) and self._kept:
            log.warning("%d system-metric points of run %s could not be sent", len(self._kept), self._run_id)
