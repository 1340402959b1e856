"""groupscale's own GRPO trainer as an engine: the spec's ``grpo:`` settings, one optimizer step per budget B."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from sweeps.spec import GRPOSpec, SweepSpec


class GroupscaleEngine:
    """engine: groupscale (the default). See sweeps.engines.base.Engine for each member."""

    name: ClassVar[str] = "groupscale"
    cluster_check: ClassVar[str | None] = None
    adds_lora: ClassVar[bool] = True

    def check_here(self, spec: SweepSpec) -> None:
        return None

    def trial_grpo(self, spec: SweepSpec, lr: float | None) -> GRPOSpec:
        return spec.grpo if lr is None else spec.grpo.model_copy(update={"lr": lr})

    def run_params(self, spec: SweepSpec) -> dict[str, Any]:
        return {f"grpo.{k}": v for k, v in spec.grpo.model_dump().items()}

    def flat_metrics(self, spec: SweepSpec) -> dict[str, str]:
        from workers.metrics import flat_by_construction

        return flat_by_construction(spec.grpo, spec.model.preset == "tabular")

    def step_structure(self, spec: SweepSpec) -> list[str] | None:
        return None

    def sampled(self, spec: SweepSpec, steps: int, samples_per_step: int) -> int:
        return steps * samples_per_step  # one generation of B per optimizer step

    def one_process_per_trial(self, spec: SweepSpec) -> bool:
        return False

    def trl_config(self, group_size: int, samples_per_step: int, spec: SweepSpec, num_processes: int) -> tuple[dict, list[str]]:
        from sweeps.recipes import trl_settings

        return trl_settings(group_size, samples_per_step, spec.grpo, num_processes)

    def verl_overrides(self, group_size: int, samples_per_step: int, spec: SweepSpec) -> tuple[list[str], list[str]]:
        from sweeps.engines.verl import verl_overrides

        return verl_overrides(group_size, samples_per_step, spec.grpo)
