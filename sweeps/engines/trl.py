"""TRL's GRPOTrainer as an engine: the user's recipe (the spec's ``trl:``, GRPOConfig fields) trained as TRL trains
it, with the sweep's G, B, T and seed. The recipe's values are read as TRL's parser reads a YAML config
(sweeps.trl_steps.trl_value); TRL itself is imported only where the controller checks a recipe's field names and types.

Source: TRL 1.16, ``GRPOConfig`` (trl/trainer/grpo_config.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from sweeps.engines.base import Engine, Recipe, register_engine
from sweeps.trl_steps import recipe_structure, structure_for, trl_value

if TYPE_CHECKING:
    from sweeps.spec.grpo import GRPOSpec
    from sweeps.spec.sweep import SweepSpec

# TRL 1.16's GRPOConfig defaults of the objective's settings (tests/sweeps/test_recipes.py holds them to the installed
# TRL): what a recipe that names none of them trains with, in from-trl's translation and in the exports.
TRL_DEFAULTS = {
    "loss_type": "dapo",
    "scale_rewards": "group",
    "epsilon": 0.2,
    "beta": 0.0,
    "num_iterations": 1,
    "temperature": 1.0,
    "max_completion_length": 512,
}


@register_engine
class TrlEngine(Engine):
    """engine: trl."""

    name = "trl"
    trainer = "workers.engines.trl:train_trial_trl"
    section = "trl"
    holds = "GRPOConfig fields"
    cluster_check = "workers.entry:check_trl_task"  # the GRPOConfig built, its packages found
    checks = "the recipe's GRPOConfig"
    adds_lora = False  # TRL gets the LoRA settings as its peft_config

    def check_sections(self, data: dict[str, Any]) -> None:
        """The recipe in ``trl:`` and nothing only groupscale's trainer runs (the bandit task, gradient_mse, tune_lr,
        ``grpo:`` settings); no ``reward_weights`` (the task's terms carry them); each budget can be split as the
        recipe's step structure asks. Raises ValueError naming the field and what is allowed."""
        from sweeps.spec.grpo import GRPOSpec
        from sweeps.spec.task import BanditTaskSpec

        super().check_sections(data)
        task, measure, grpo, recipe = data.get("task"), data.get("measure"), data.get("grpo"), data.get("trl")
        # settings that differ from groupscale's defaults (a stored spec holds every field, at its default)
        changed = sorted(k for k, v in (grpo or GRPOSpec()).model_dump().items() if v != GRPOSpec.model_fields[k].default)
        refused = [
            (isinstance(task, BanditTaskSpec), "task bandit (a tabular policy; TRL trains language models)"),
            (measure is not None and measure.kind != "outcome", "measure.kind gradient_mse (it measures groupscale's estimator)"),
            (data.get("tune_lr") is not None, "tune_lr (set learning_rate in trl:)"),
            (
                grpo is not None and grpo.dynamic_sampling is not None,
                "grpo.dynamic_sampling (TRL's GRPOTrainer has no group filter: it trains every sampled group; use engine "
                "groupscale)",
            ),
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

    def check_here(self, spec: SweepSpec) -> None:
        """Every trl: field is a field of the installed TRL's GRPOConfig, with a value its parser reads (coerce).
        Raises ValueError when TRL is missing here (message starting ``engine:``)."""
        try:
            import trl  # noqa: F401 - only whether it is there
        except ImportError as e:
            raise ValueError(
                f"engine: engine trl needs TRL on the controller and the workers (pip install 'groupscale[trl]'): {e}"
            ) from None
        coerce(spec.trl_recipe)

    def recipe(self, spec: SweepSpec) -> Recipe:
        """The recipe's objective in groupscale's names, TRL's defaults where it names none (the learning rate left at
        groupscale's default: an export does not carry it over), its optimizer steps per generation, and the recipe.

        Raises:
            ValueError: a setting groupscale has no name for (a loss_type or scale_rewards it does not run), naming it.
        """
        from sweeps.spec.grpo import TRL_ALIASES, GRPOSpec

        recipe = {k: trl_value(v) for k, v in spec.trl_recipe.items()}
        names = [k for k in (*TRL_ALIASES, "temperature", "importance_sampling_level") if k != "learning_rate"]
        given = {k: recipe[k] for k in names if recipe.get(k) is not None}
        grpo = GRPOSpec.model_validate({**TRL_DEFAULTS, **given})
        return Recipe(grpo, recipe_structure(recipe).optimizer_steps_per_generation, spec.trl_recipe)

    def trial_grpo(self, spec: SweepSpec, lr: float | None) -> GRPOSpec:
        """The held-out eval samples as the recipe does (its max_completion_length and temperature, TRL's defaults
        when it sets none); the recipe's own learning_rate trains."""
        recipe = {**TRL_DEFAULTS, **spec.trl_recipe}  # the installed TRL's defaults (held to it by a test)
        return spec.grpo.model_copy(
            update={"max_new_tokens": int(recipe["max_completion_length"]), "temperature": float(recipe["temperature"])}
        )

    def step_structure(self, spec: SweepSpec) -> list[str] | None:
        return [structure_for(spec.trl_recipe, b, spec.resources.num_processes).describe() for b in spec.samples_per_step]

    def sampled(self, spec: SweepSpec, steps: int, samples_per_step: int) -> int:
        """TRL generates B = generation_batch_size completions at a time and takes k x num_iterations optimizer steps
        on each (k = 1/q: q generations a step), so ``steps`` steps sample ceil(steps / (k mu)) generations of B."""
        structure = structure_for(spec.trl_recipe, samples_per_step)
        per_generation = structure.optimizer_steps_per_generation * structure.num_iterations
        return math.ceil(steps / per_generation) * samples_per_step

    def one_process_per_trial(self, spec: SweepSpec) -> bool:
        """Trials that vLLM generates for: vLLM does not give GPU memory back inside a process."""
        return trl_value(spec.trl_recipe.get("use_vllm", False)) is True


def grpo_config_fields() -> set[str]:
    """The installed TRL's GRPOConfig field names. Raises ValueError (starting ``--engine``) when TRL is missing."""
    import dataclasses

    try:
        from trl import GRPOConfig
    except ImportError:
        raise ValueError(
            "--engine trl reads the installed TRL's GRPOConfig: pip install 'groupscale[trl]' (or --engine groupscale)"
        ) from None
    return {f.name for f in dataclasses.fields(GRPOConfig)}


def coerce(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe's values as TRL's parser reads a YAML config (trl_value: YAML 1.1 reads ``1e-6`` as a string;
    ``trl grpo --config`` takes it as a float), checked against the installed TRL's GRPOConfig.

    Raises:
        ValueError: an unknown GRPOConfig field (with the closest names), or a value TRL's parser would refuse.
    """
    import dataclasses
    import difflib
    import typing

    from trl import GRPOConfig

    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    hints = typing.get_type_hints(GRPOConfig)
    out = {}
    for key, value in recipe.items():
        if key not in names:
            close = difflib.get_close_matches(key, sorted(names), n=3, cutoff=0.6)
            raise ValueError(
                f"trl.{key}: not a field of TRL's GRPOConfig" + (f" (did you mean {', '.join(close)}?)" if close else "")
            )
        kinds = {t for t in (typing.get_args(hints[key]) or (hints[key],)) if t in (int, float, bool)}
        if isinstance(value, str) and kinds:
            read = trl_value(value)
            if type(read) is int and int not in kinds and float in kinds:
                read = float(read)  # "5" for a float field: 5.0, as TRL's parser makes it
            if type(read) not in kinds:
                raise ValueError(f"trl.{key}: {value!r} is not a {' or '.join(sorted(k.__name__ for k in kinds))}")
            value = read
        out[key] = value
    return out
