"""The function a Ray worker runs for one trial: build the config, train, log, return plain data."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from workers.trainer import TrialConfig, train_trial


def run_probe_task(config: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    """Run the variance-component probe (workers.probe) for a spec's task and model."""
    from workers.probe import run_probe

    return run_probe(TrialConfig(**config), probe["prompts"], probe["completions"], probe["projection_dim"], probe["seed"])


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
    finally:
        if logger is not None:
            logger.flush()
    return {**asdict(result), "seconds": time.perf_counter() - start}
