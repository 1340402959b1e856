"""The engines' trainers on the workers' side of the torch line: each engine's declaration (sweeps.engines) names its
trainer as ``"module:function"``, imported here only when it runs, so the controller, which imports workers.measures,
never imports torch. A trainer trains one outcome trial: ``train(cfg, report, placement) -> TrialResult``."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from sweeps.engines import get_engine
from sweeps.trial import TrialConfig, TrialResult
from workers.engines.base import Placement, Report

Trainer = Callable[[TrialConfig, Report, Placement | None], TrialResult]


def trainer(engine: str) -> Trainer:
    """The trial function of ``engine`` (its module imported). Raises ValueError naming the valid engines."""
    module, name = get_engine(engine).trainer.split(":")
    return getattr(importlib.import_module(module), name)
