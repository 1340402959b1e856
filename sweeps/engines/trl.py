"""TRL's GRPOTrainer as an engine: the user's recipe (the spec's ``trl:``, GRPOConfig fields) trained as TRL trains
it, with the sweep's G, B, T and seed; TRL itself is imported only where the controller checks a recipe."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

from sweeps.from_trl import TRL_DEFAULTS
from sweeps.trl_steps import recipe_structure, structure_for

if TYPE_CHECKING:
    from sweeps.spec import GRPOSpec, SweepSpec


class TrlEngine:
    """engine: trl. See sweeps.engines.base.Engine for each member."""

    name: ClassVar[str] = "trl"
    cluster_check: ClassVar[str | None] = "workers.entry:check_trl_task"  # the GRPOConfig built, its packages found
    adds_lora: ClassVar[bool] = False  # TRL gets the LoRA settings as its peft_config

    def check_here(self, spec: SweepSpec) -> None:
        """Every trl: field is a field of the installed TRL's GRPOConfig, with a value its parser reads
        (workers.engines.trl.coerce). Raises ValueError when TRL is missing here (message starting ``engine:``)."""
        try:
            import trl  # noqa: F401 - only whether it is there
        except ImportError as e:
            raise ValueError(
                f"engine: engine trl needs TRL on the controller and the workers (pip install 'groupscale[trl]'): {e}"
            ) from None
        coerce(spec.trl_recipe)

    def trial_grpo(self, spec: SweepSpec, lr: float | None) -> GRPOSpec:
        """The held-out eval samples as the recipe does (its max_completion_length and temperature, TRL's defaults
        when it sets none); the recipe's own learning_rate trains."""
        recipe = {**TRL_DEFAULTS, **spec.trl_recipe}  # the installed TRL's defaults (held to it by a test)
        return spec.grpo.model_copy(
            update={"max_new_tokens": int(recipe["max_completion_length"]), "temperature": float(recipe["temperature"])}
        )

    def run_params(self, spec: SweepSpec) -> dict[str, Any]:
        return {}  # the worker logs trl.* as TRL ran them (workers.engines.trl.trained_settings)

    def flat_metrics(self, spec: SweepSpec) -> dict[str, str]:
        return {}

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
        return str(spec.trl_recipe.get("use_vllm", False)).lower() == "true"

    def trl_config(self, group_size: int, samples_per_step: int, spec: SweepSpec, num_processes: int) -> tuple[dict, list[str]]:
        """The user's recipe with num_generations = G and the batch settings that give B with the recipe's optimizer
        steps per generation on ``num_processes`` processes."""
        structure = structure_for(spec.trl_recipe, samples_per_step, num_processes)
        settings = {k: v for k, v in spec.trl_recipe.items() if k != "steps_per_generation"}
        settings |= {"num_generations": group_size, **structure.config()}
        return settings, [structure.describe(), "the recipe as swept, with the measured G and B"]

    def verl_overrides(self, group_size: int, samples_per_step: int, spec: SweepSpec) -> tuple[list[str], list[str]]:
        """The recipe that was swept (its objective and optimizer steps per generation), not groupscale's defaults."""
        from sweeps.engines.verl import verl_overrides
        from sweeps.recipes import recipe_grpo

        k = recipe_structure(spec.trl_recipe).optimizer_steps_per_generation
        return verl_overrides(group_size, samples_per_step, recipe_grpo(spec.trl_recipe), k)


def coerce(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe's values as TRL's parser reads a YAML config: strings for numeric or boolean fields converted
    (YAML 1.1 reads ``1e-6`` as a string; ``trl grpo --config`` takes it as a float).

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
            try:
                value = _parse(value, kinds)
            except ValueError:
                raise ValueError(f"trl.{key}: {value!r} is not a {' or '.join(sorted(k.__name__ for k in kinds))}") from None
        out[key] = value
    return out


def _parse(text: str, kinds: set[type]) -> Any:
    if bool in kinds and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if int in kinds and text.lstrip("+-").isdigit():
        return int(text)
    if float in kinds:
        return float(text)
    raise ValueError(text)
