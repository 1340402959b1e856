"""The engines a sweep can train with, on the controller's side of the torch line (their trainers: workers/engines/).
Adding one: a module with a class decorated ``@register_engine`` (sweeps.engines.base), imported here."""

from __future__ import annotations

from sweeps.engines import groupscale, trl  # each module registers its engine
from sweeps.engines.base import ENGINES, Engine, Recipe, get_engine, register_engine
