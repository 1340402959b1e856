"""``recommend --format nemo-rl``: the answer as NeMo-RL overrides (sweeps.frameworks.nemo_rl: prompts a step = B / G,
``policy.train_global_batch_size`` in completions keeping k, the estimator's flags, loss, clip and KL the sweep trained
with)."""

from __future__ import annotations

from sweeps.exports.base import FrameworkExport, register_export
from sweeps.frameworks import nemo_rl  # noqa: F401  (registers the framework the export writes for)


@register_export
class NemoRLExport(FrameworkExport):
    name = framework = "nemo-rl"
    help = "NeMo-RL overrides of run_grpo.py (with the sweep's loss settings)"
