"""The engines' trainers, by name, on the workers' side of the torch line (what the controller knows of each engine:
sweeps/engines/). Each trains one outcome trial: ``train(cfg, report) -> TrialResult`` (workers.engines.base). A
trainer's module is imported only when it runs, so the controller, which imports workers.measures, never imports
torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from workers.config import TrialConfig
from workers.engines.base import Report, TrialResult

# engine -> "module:function" that trains an outcome trial
TRAINERS: dict[str, str] = {
    "groupscale": "workers.engines.groupscale:train_trial",
    "trl": "workers.engines.trl:train_trial_trl",
}


def trainer(engine: str) -> Callable[[TrialConfig, Report], TrialResult]:
    """The trial function of ``engine`` (its module imported). Raises ValueError naming the valid engines."""
    if engine not in TRAINERS:
        raise ValueError(f"unknown engine {engine!r}; valid: {', '.join(TRAINERS)}")
    module, name = TRAINERS[engine].split(":")
    return getattr(importlib.import_module(module), name)
