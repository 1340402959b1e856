"""What a trial measures: the registry of measures (and engines) and the function that runs one (torch-free at import).

The controller and workers.answers import it; each measure's module is imported only when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from workers.config import Report, TrialConfig, TrialResult

# spec measure.kind -> "module:function" a trial runs: training then an eval (by the spec's engine: its ``trial``,
# sweeps.engines), or the gradient-MSE measurement of groupscale's estimator
MEASURES: dict[str, str | None] = {"outcome": None, "gradient_mse": "workers.gradient_mse:measure_gradient_mse"}


def measure_function(kind: str, engine: str = "groupscale") -> Callable[[TrialConfig, Report], TrialResult]:
    """The function that runs measure ``kind`` under ``engine`` (its module imported): an outcome trial is the
    engine's ``trial``; another measure runs on groupscale's trainer alone. Raises ValueError for an unknown kind or
    engine, or a measure the engine does not take (lists the valid ones)."""
    from sweeps.engines import ENGINES, get_engine

    trainer = get_engine(engine)
    if kind not in MEASURES:
        raise ValueError(f"unknown measure {kind!r}; valid: {', '.join(MEASURES)}")
    ref = MEASURES[kind] or trainer.trial
    if MEASURES[kind] is not None and trainer is not ENGINES["groupscale"]:
        raise ValueError(f"measure {kind!r} runs on engine groupscale, not {engine!r}; valid for {engine!r}: outcome")
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def run_measure(cfg: TrialConfig, report: Report = lambda m, s: None) -> TrialResult:
    """measure_function(cfg.measure.kind, cfg.engine)(cfg, report). Raises ValueError for an unknown measure or engine."""
    return measure_function(cfg.measure.kind, cfg.engine)(cfg, report)
