"""``recommend --format skyrl``: the answer as SkyRL overrides of ``main_base`` (sweeps.frameworks.skyrl: counted in
prompts, ``trainer.policy_mini_batch_size`` keeping k, the loss reduction, clip and KL the sweep trained with)."""

from __future__ import annotations

from sweeps.exports.base import FrameworkExport, register_export
from sweeps.frameworks import skyrl  # noqa: F401  (registers the framework the export writes for)


@register_export
class SkyRLExport(FrameworkExport):
    name = framework = "skyrl"
    help = "SkyRL overrides of skyrl.train.entrypoints.main_base (with the sweep's loss settings)"
