"""groupscale's own GRPO trainer as an engine: the spec's ``grpo:`` settings, a generation of B completions every k =
``grpo.steps_per_generation`` optimizer steps (k = 1 by default: one fresh generation of B per step), each step on its
mini-batch of B / k completions (workers.batch.Generation)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from sweeps.engines.base import Engine, register_engine
from sweeps.metrics import flat_by_construction

if TYPE_CHECKING:
    from sweeps.spec.grpo import GRPOSpec
    from sweeps.spec.sweep import SweepSpec


def flat_steps(grpo: GRPOSpec, tabular: bool = False) -> dict[str, str]:
    """sweeps.metrics.flat_by_construction under groupscale's trainer: with k > 1 the mini-batches after a generation's
    first are trained off-policy (their ratio is not 1), so the clip fractions and the loss move; under
    grpo.dynamic_sampling no trained group has equal rewards."""
    flat = flat_by_construction(grpo, tabular)
    if grpo.steps_per_generation > 1:
        for key in ("clip_frac_low", "clip_frac_high", "loss"):
            flat.pop(key, None)
        if "momentum_overshoot_frac" in flat:
            flat["momentum_overshoot_frac"] = "one pass (inner_steps 1): no optimizer step follows on the same mini-batch"
    if grpo.dynamic_sampling is not None:  # the trained groups: their share of those sampled is logged instead
        why = "dynamic sampling trains groups of differing rewards only (see dynamic_sampling/informative_share)"
        flat |= dict.fromkeys(("zero_variance_group_frac", "frac_groups_all_wrong", "frac_groups_all_right"), why)
    return flat


def check_dynamic_sampling(grpo: GRPOSpec, measure: Any) -> None:
    """grpo.dynamic_sampling with what keeps it DAPO's filter: an advantage under which a group of equal rewards has zero
    advantage (all but oracle: r - V(x) is not 0 there, so dropping it would change the gradient's direction), uniform
    groups (per_prompt's G follows pass rates the filter would bias) and measure outcome (gradient_mse measures the
    unfiltered estimator). Raises ValueError naming the field and the allowed values."""
    if grpo.advantage == "oracle":
        raise ValueError(
            "grpo.dynamic_sampling: advantage oracle gives a group of equal rewards a non-zero advantage r - V(x), so "
            "dropping it would change the gradient; grpo.advantage allowed: loo, mean, mean_std, loo_std"
        )
    if grpo.allocation != "uniform":
        raise ValueError(
            "grpo.dynamic_sampling: grpo.allocation per_prompt draws each prompt's G from pass rates the filter would "
            "bias, and fills B with groups of several sizes; grpo.allocation allowed: uniform"
        )
    if measure is not None and measure.kind != "outcome":
        raise ValueError(
            f"grpo.dynamic_sampling: measure.kind {measure.kind} measures the unfiltered gradient of one batch; "
            "measure.kind allowed: outcome"
        )


@register_engine
class GroupscaleEngine(Engine):
    """engine: groupscale (the default)."""

    name = "groupscale"
    trainer = "workers.engines.groupscale:train_trial"

    def check_sections(self, data: dict[str, Any]) -> None:
        """The base's checks, and a k = grpo.steps_per_generation > 1 that splits every (G, B) of the grid into k
        mini-batches of whole groups on each process (k divides B / G / num_processes), with uniform groups and measure
        outcome. steps, checkpoint_every and eval.every may be any number: a checkpoint falls only where a generation
        ends (or at T, after which nothing trains), so a resume never repeats nor splits a generation; a last
        generation cut by T trains its first T mod k mini-batches. Raises ValueError naming the field and the allowed
        values."""
        super().check_sections(data)
        grpo, measure, resources = data.get("grpo"), data.get("measure"), data.get("resources")
        if grpo is not None and grpo.dynamic_sampling is not None:
            check_dynamic_sampling(grpo, measure)
        if grpo is None or grpo.steps_per_generation == 1:
            return
        k = grpo.steps_per_generation
        if grpo.allocation != "uniform":
            raise ValueError(
                f"grpo.steps_per_generation {k}: mini-batches of whole groups need grpo.allocation uniform; allowed: 1"
            )
        if measure is not None and measure.kind != "outcome":
            raise ValueError(
                f"grpo.steps_per_generation {k}: measure.kind {measure.kind} measures one gradient of B completions; "
                "allowed: 1 (set samples_per_step to B / k)"
            )
        procs = resources.num_processes if resources is not None else 1
        cells = [(g, b) for b in data.get("samples_per_step") or () for g in data.get("group_sizes") or ()]
        prompts = [b // g for g, b in cells]
        if any(n % (k * procs) for n in prompts):
            g, b = next((g, b) for g, b in cells if (b // g) % (k * procs))
            smallest = min(prompts)
            allowed = [d for d in range(1, smallest + 1) if all(n % (d * procs) == 0 for n in prompts)] or [1]
            raise ValueError(
                f"grpo.steps_per_generation {k}: G={g} at B={b} gives {b // g} prompts, which {procs} process(es) cannot "
                f"split into {k} mini-batches of whole groups each; allowed for this grid: {', '.join(map(str, allowed))}"
            )

    def run_params(self, spec: SweepSpec) -> dict[str, Any]:
        return {f"grpo.{k}": v for k, v in spec.grpo.model_dump().items()}

    def flat_metrics(self, spec: SweepSpec) -> dict[str, str]:
        return flat_steps(spec.grpo, spec.model.preset == "tabular")

    def step_structure(self, spec: SweepSpec) -> list[str] | None:
        k, mu = spec.grpo.steps_per_generation, spec.grpo.inner_steps
        if k == 1:
            return None
        passes = f"; {mu} passes over them (inner_steps), {mu} optimizer steps a step" if mu > 1 else ""
        return [
            f"each generation of {b} completions feeds {k} steps, each on a mini-batch of {b // k} (whole groups, in "
            f"sampling order){passes}"
            for b in spec.samples_per_step
        ]

    def sampled(self, spec: SweepSpec, steps: int, samples_per_step: int) -> int:
        """A generation of B every k steps: ceil(T / k) generations (T B / k when k divides T). Under
        grpo.dynamic_sampling this is the least: each generation may spend up to max_batches of B (the trial logs
        ``sampled_completions``); under tokens_per_step the most: each generation samples N G <= B (the trial logs
        ``token_budget/prompts``)."""
        return math.ceil(steps / spec.grpo.steps_per_generation) * samples_per_step
