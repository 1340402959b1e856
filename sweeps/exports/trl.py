"""``recommend --format trl``: the answer as the YAML ``trl grpo --config`` reads (or ``GRPOConfig(**yaml.safe_load(
text))``). A TRL recipe (engine trl) comes back as written with the measured G and the batch settings that give B with
its optimizer steps per generation; groupscale's objective as the GRPOConfig settings that train it (trl_settings).

Names: TRL ``trl/trainer/grpo_config.py`` (num_generations, generation_batch_size, loss_type, scale_rewards, epsilon,
epsilon_high, beta, num_iterations).
"""

from __future__ import annotations

from typing import Any

from sweeps.engines import Recipe
from sweeps.exports.base import Export, ExportError, check_divides, comments, register_export
from sweeps.spec import TRL_LOSS_TYPES, GRPOSpec
from sweeps.trl_steps import structure_for
from sweeps.yamlfile import dump_yaml

# our loss_aggregation -> TRL loss_type (dapo for token_mean: TRL's default and its global-token normaliser)
TO_TRL_LOSS = {"seq_mean_token_mean": "grpo", "token_mean": "dapo", "seq_mean_token_sum_norm": "dr_grpo"}
assert set(TO_TRL_LOSS.values()) <= set(TRL_LOSS_TYPES)


@register_export
class TrlExport(Export):
    name = "trl"
    help = "a GRPOConfig YAML"

    def render(self, group_size: int, samples_per_step: int, recipe: Recipe, header: str, num_processes: int = 1) -> str:
        """Raises ExportError (option ``--num-processes``) when G and B cannot be set so on ``num_processes``."""
        try:
            settings, notes = trl_config(group_size, samples_per_step, recipe, num_processes)
        except ValueError as e:
            raise ExportError(str(e), option="--num-processes") from None
        return "\n".join([*comments(header, notes), dump_yaml(settings).rstrip()]) + "\n"


def trl_config(group_size: int, samples_per_step: int, recipe: Recipe, num_processes: int = 1) -> tuple[dict, list[str]]:
    """GRPOConfig settings for G and B that train ``recipe`` on ``num_processes`` processes, and notes: a TRL recipe
    with num_generations = G and the batch settings that keep its optimizer steps per generation; else trl_settings.
    Raises ValueError when they cannot be set so."""
    if recipe.trl is None:
        return trl_settings(group_size, samples_per_step, recipe.grpo, num_processes)
    structure = structure_for(recipe.trl, samples_per_step, num_processes)
    settings = {k: v for k, v in recipe.trl.items() if k != "steps_per_generation"}
    settings |= {"num_generations": group_size, **structure.config()}
    return settings, [structure.describe(), "the recipe as swept, with the measured G and B"]


def trl_settings(
    group_size: int, samples_per_step: int, grpo: GRPOSpec, num_processes: int = 1
) -> tuple[dict[str, Any], list[str]]:
    """GRPOConfig keyword arguments for G and B with the sweep's loss settings, and notes on what does not carry over
    exactly. The batch settings make each generation batch of B one optimizer step on ``num_processes`` processes,
    as groupscale's trainer takes it (TRL's defaults would make B = 48 six steps of 8, and refuse B = 12).
    Raises ValueError unless G >= 2 divides B and B is a whole number of completions per process."""
    check_divides(group_size, samples_per_step)
    k = grpo.steps_per_generation  # TRL's steps_per_generation counts micro-steps: k of them with no accumulation
    structure = structure_for(
        {"steps_per_generation": k, "gradient_accumulation_steps": 1} if k > 1 else {}, samples_per_step, num_processes
    )
    settings: dict[str, Any] = {
        "num_generations": group_size,
        **structure.config(),  # k optimizer steps per generation batch of B
        "loss_type": TO_TRL_LOSS[grpo.loss_aggregation],
        "epsilon": grpo.clip_eps,
        "beta": grpo.kl_beta,
        "num_iterations": grpo.inner_steps,
        "temperature": grpo.temperature,
        "max_completion_length": grpo.max_new_tokens,
    }
    if grpo.clip_eps_high is not None:
        settings["epsilon_high"] = grpo.clip_eps_high
    if grpo.importance_sampling_level != "token":
        settings["importance_sampling_level"] = grpo.importance_sampling_level
    notes = [
        f"for {num_processes} process(es): {structure.describe()} (lower per_device_train_batch_size and raise "
        "gradient_accumulation_steps to fit memory, keeping the steps per generation)",
        "learning_rate is not carried over: a sweep's lr is tuned for its own model",
    ]
    settings["scale_rewards"] = "group" if grpo.advantage == "mean_std" else "none"
    if grpo.advantage not in ("mean_std", "mean"):
        notes.append(
            f"advantage {grpo.advantage!r} has no GRPOConfig setting: scale_rewards none (mean baseline) is the closest; "
            "the leave-one-out advantage is that one times G/(G-1) (TRL's RLOOTrainer uses loo)"
        )
    if grpo.reward_scale != 1.0:
        notes.append(f"the sweep multiplied rewards by {grpo.reward_scale:g}: do the same in your reward functions")
    return settings, notes
