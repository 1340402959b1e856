"""The engines a sweep can train with, by name, on the controller's side of the torch line (the training side:
workers/engines/). Adding one: a module with a class that has the members of ``base.Engine``, and a line in ENGINES.
"""

from __future__ import annotations

from sweeps.engines.base import Engine
from sweeps.engines.groupscale import GroupscaleEngine
from sweeps.engines.trl import TrlEngine

ENGINES: dict[str, Engine] = {engine.name: engine for engine in (GroupscaleEngine(), TrlEngine())}


def get_engine(name: str) -> Engine:
    """The engine called ``name``. Raises ValueError naming the valid engines."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; valid: {', '.join(ENGINES)}") from None


__all__ = ["ENGINES", "Engine", "get_engine"]
