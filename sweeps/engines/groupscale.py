"""groupscale's own GRPO trainer as an engine: the spec's ``grpo:`` settings, one fresh generation of B per optimizer
step (every default of sweeps.engines.base.Engine)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweeps.engines.base import Engine, register_engine
from sweeps.metrics import flat_by_construction

if TYPE_CHECKING:
    from sweeps.spec.sweep import SweepSpec


@register_engine
class GroupscaleEngine(Engine):
    """engine: groupscale (the default)."""

    name = "groupscale"
    trainer = "workers.engines.groupscale:train_trial"

    def run_params(self, spec: SweepSpec) -> dict[str, Any]:
        return {f"grpo.{k}": v for k, v in spec.grpo.model_dump().items()}

    def flat_metrics(self, spec: SweepSpec) -> dict[str, str]:
        return flat_by_construction(spec.grpo, spec.model.preset == "tabular")
