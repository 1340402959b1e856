"""The answer of a sweep ("use G at budget B") in another trainer's keys and units, one module per ``recommend
--format``: each export reads the engine's normalised objective (sweeps.engines.Recipe), so the run that uses G trains
the objective G was measured for. Adding one: a module with a class decorated ``@register_export`` (sweeps.exports.base),
imported here."""

from __future__ import annotations

from sweeps.exports import easyr1, nemo_rl, openrlhf, prime_rl, skyrl, trl, verl  # each module registers its export
from sweeps.exports.base import EXPORTS, Export, ExportError, get_export, register_export
