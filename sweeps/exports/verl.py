"""``recommend --format verl``: the answer as verl hydra overrides (sweeps.frameworks.verl: counted in prompts,
``ppo_mini_batch_size`` keeping k, the loss mode, clip and KL the sweep trained with)."""

from __future__ import annotations

from sweeps.exports.base import FrameworkExport, register_export


@register_export
class VerlExport(FrameworkExport):
    name = framework = "verl"
    help = "hydra overrides (with the sweep's loss settings)"
