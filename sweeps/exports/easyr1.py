"""``recommend --format easyr1``: the answer as EasyR1 overrides of ``verl.trainer.main`` (sweeps.frameworks.easyr1:
counted in prompts, ``worker.actor.global_batch_size`` keeping k, the loss type, clip and KL the sweep trained with)."""

from __future__ import annotations

from sweeps.exports.base import FrameworkExport, register_export
from sweeps.frameworks import easyr1  # noqa: F401  (registers the framework the export writes for)


@register_export
class EasyR1Export(FrameworkExport):
    name = framework = "easyr1"
    help = "EasyR1 overrides (with the sweep's loss settings)"
