"""``recommend --format openrlhf``: the answer as OpenRLHF's dotted flags (sweeps.frameworks.openrlhf: prompts per
rollout, completions per optimizer step, the estimator, clip, loss and KL the sweep trained with)."""

from __future__ import annotations

from sweeps.exports.base import FrameworkExport, register_export


@register_export
class OpenRLHFExport(FrameworkExport):
    name = framework = "openrlhf"
    help = "train_ppo_ray flags (with the sweep's loss settings)"
