"""What a trial runs: its measure (the registry of measures; an outcome trial is its engine's trainer, named by the
engine's declaration as ``"module:function"``), and the function that runs one. Torch-free at import: the controller
and workers.answers import it; each measure's or trainer's module is imported only when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from sweeps.engines import get_engine
from sweeps.trial import TrialConfig, TrialResult
from workers.engines.base import Placement, Report

Trainer = Callable[[TrialConfig, Report, Placement | None], TrialResult]

# spec measure.kind -> "module:function" a trial runs; "outcome" (training, then an eval) is the engine's trainer
# (workers.engines), the others measure groupscale's estimator on one process (the spec takes them so alone)
MEASURES: dict[str, str | None] = {"outcome": None, "gradient_mse": "workers.gradient_mse:measure_gradient_mse"}


def trainer(engine: str) -> Trainer:
    """The trial function of ``engine`` (its module imported). Raises ValueError naming the valid engines."""
    module, name = get_engine(engine).trainer.split(":")
    return getattr(importlib.import_module(module), name)


def measure_function(kind: str, engine: str = "groupscale") -> Callable[..., TrialResult]:
    """The function that runs measure ``kind`` (its module imported): for an outcome trial, ``engine``'s trainer.
    Raises ValueError for an unknown kind or engine (lists the valid ones)."""
    if kind not in MEASURES:
        raise ValueError(f"unknown measure {kind!r}; valid: {', '.join(MEASURES)}")
    ref = MEASURES[kind]
    if ref is None:
        return trainer(engine)
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def run_measure(cfg: TrialConfig, report: Report = lambda m, s: None, placement: Placement | None = None) -> TrialResult:
    """Run the trial's measure: an outcome trial by its engine's trainer on ``placement`` (default: alone), another
    measure on this one process. Raises ValueError for an unknown measure or engine."""
    run = measure_function(cfg.measure.kind, cfg.engine)
    return run(cfg, report, placement) if MEASURES[cfg.measure.kind] is None else run(cfg, report)
