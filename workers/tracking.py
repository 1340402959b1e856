"""MLflow logging from inside a trial: a buffered ``report(metrics, step)`` for the trainer.

The controller creates and ends the run (so it is never left RUNNING); the trial only logs into it.
"""

from __future__ import annotations

import math
import time

from mlflow import MlflowClient
from mlflow.entities import Metric


class RunLogger:
    """Buffers metric points and sends them with log_batch every ``flush_every`` points."""

    def __init__(self, tracking_uri: str, run_id: str, flush_every: int = 500) -> None:
        self.client = MlflowClient(tracking_uri)
        self.run_id = run_id
        self.flush_every = flush_every
        self._buffer: list[Metric] = []

    def __call__(self, metrics: dict[str, float], step: int) -> None:
        now = int(time.time() * 1000)
        self._buffer += [Metric(k, float(v), now, step) for k, v in metrics.items() if math.isfinite(float(v))]
        if len(self._buffer) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        while self._buffer:  # log_batch takes at most 1000 metrics per call
            chunk, self._buffer = self._buffer[:1000], self._buffer[1000:]
            self.client.log_batch(self.run_id, metrics=chunk)
