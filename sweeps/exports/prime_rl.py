"""``recommend --format prime-rl``: the answer as prime-rl's flags after ``uv run rl @ rl.toml`` (sweeps.frameworks.prime_rl:
G, B already in completions, the sampling, every sample trained; an objective prime-rl does not train refused)."""

from __future__ import annotations

from sweeps.exports.base import FrameworkExport, register_export


@register_export
class PrimeRLExport(FrameworkExport):
    name = framework = "prime-rl"
    help = "prime-rl's flags after uv run rl @ rl.toml (G, batch_size in completions, sampling)"
