"""What a spec's ``trl:`` section and its other settings may be under each engine (the engines themselves, on both
sides of the torch line: sweeps/engines/ and workers/engines/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sweeps.spec.grpo import GRPOSpec
from sweeps.spec.task import BanditTaskSpec
from sweeps.trl_steps import structure_for


def groupscale_sections(recipe: dict[str, Any] | None, data: dict[str, Any]) -> None:
    """engine groupscale: no ``trl:`` (groupscale's settings are ``grpo:``). Raises ValueError saying so."""
    if recipe is not None:
        raise ValueError("trl: holds GRPOConfig fields for engine trl; set engine: trl, or use grpo: (groupscale's names)")


def trl_sections(recipe: dict[str, Any] | None, data: dict[str, Any]) -> None:
    """engine trl: the recipe in ``trl:`` and nothing only groupscale's trainer runs (the bandit task, gradient_mse,
    tune_lr, ``grpo:`` settings); no ``reward_weights`` (the task's terms carry them); each budget can be split as the
    recipe's step structure asks. Raises ValueError naming the field and what is allowed.

    Args:
        recipe: the ``trl:`` section; data: the spec's fields validated before it (task, measure, grpo, tune_lr, ...).
    """
    task, measure, grpo = data.get("task"), data.get("measure"), data.get("grpo")
    # settings that differ from groupscale's defaults (a stored spec holds every field, at its default)
    changed = sorted(k for k, v in (grpo or GRPOSpec()).model_dump().items() if v != GRPOSpec.model_fields[k].default)
    refused = [
        (isinstance(task, BanditTaskSpec), "task bandit (a tabular policy; TRL trains language models)"),
        (measure is not None and measure.kind != "outcome", "measure.kind gradient_mse (it measures groupscale's estimator)"),
        (data.get("tune_lr") is not None, "tune_lr (set learning_rate in trl:)"),
        (bool(changed), f"grpo: {changed} (TRL reads trl:)"),
    ]
    for bad, what in refused:
        if bad:
            raise ValueError(f"engine trl does not take {what}; the recipe goes in trl:, in TRL's names")
    if recipe is not None and "reward_weights" in recipe:  # TRL would get two: the recipe's and the task's terms'
        raise ValueError(
            "trl.reward_weights: the sweep passes TRL each task.rewards entry's weight, in order; set "
            "weight: on each entry instead"
        )
    for b in data.get("samples_per_step") or ():
        structure_for(recipe or {}, b)  # a ValueError names the field and the allowed budgets


# engine -> its check of the sections (the spec's engine: field allows exactly these names)
ENGINE_SECTIONS: dict[str, Callable[[dict[str, Any] | None, dict[str, Any]], None]] = {
    "groupscale": groupscale_sections,
    "trl": trl_sections,
}
