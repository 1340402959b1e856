"""What a trial measures: the registry of measures (and engines) and the function that runs one (torch-free at import).

The controller and workers.answers import it; each measure's module is imported only when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from workers.config import Report, TrialConfig, TrialResult

# spec measure.kind -> "module:function" a trial runs: GRPO training then an eval, or the gradient-MSE measurement
MEASURES: dict[str, str] = {"outcome": "workers.trainer:train_trial", "gradient_mse": "workers.gradient_mse:measure_gradient_mse"}
ENGINES: dict[str, str] = {"trl": "workers.trl_engine:train_trial_trl"}  # engine -> its outcome trial (groupscale: MEASURES)


def measure_function(kind: str, engine: str = "groupscale") -> Callable[[TrialConfig, Report], TrialResult]:
    """The function MEASURES (or, for another engine, ENGINES) names for ``kind`` (its module imported). Raises
    ValueError for an unknown kind or engine (lists the valid ones)."""
    if engine != "groupscale":
        if engine not in ENGINES or kind != "outcome":
            raise ValueError(f"unknown engine {engine!r} for measure {kind!r}; valid: groupscale, {', '.join(ENGINES)} (outcome)")
        ref = ENGINES[engine]
    elif kind not in MEASURES:
        raise ValueError(f"unknown measure {kind!r}; valid: {', '.join(MEASURES)}")
    else:
        ref = MEASURES[kind]
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def run_measure(cfg: TrialConfig, report: Report = lambda m, s: None) -> TrialResult:
    """measure_function(cfg.measure.kind, cfg.engine)(cfg, report). Raises ValueError for an unknown measure or engine."""
    return measure_function(cfg.measure.kind, cfg.engine)(cfg, report)
