"""Translation between groupscale's GRPO settings and TRL's GRPOConfig, both ways.

groupscale's loss settings for G and B as GRPOConfig settings (``trl_settings``, what ``recommend --format trl``
prints for a groupscale sweep: sweeps.engines.export), so the run that uses G trains the objective G was measured
for; a TRL recipe's objective in groupscale's names (``recipe_grpo``). A recipe into a spec: sweeps.from_trl.

Names: TRL ``trl/trainer/grpo_config.py`` (num_generations, generation_batch_size, loss_type,
scale_rewards, epsilon, epsilon_high, beta, num_iterations).
"""

from __future__ import annotations

from typing import Any

from sweeps.from_trl import TRL_DEFAULTS, trl_value
from sweeps.spec import TRL_ALIASES, TRL_LOSS_TYPES, GRPOSpec, valid_group_sizes
from sweeps.trl_steps import structure_for

# our loss_aggregation -> TRL loss_type (dapo for token_mean: TRL's default and its global-token normaliser)
TO_TRL_LOSS = {"seq_mean_token_mean": "grpo", "token_mean": "dapo", "seq_mean_token_sum_norm": "dr_grpo"}
assert set(TO_TRL_LOSS.values()) <= set(TRL_LOSS_TYPES)


def recipe_grpo(recipe: dict[str, Any]) -> GRPOSpec:
    """The objective a TRL recipe (an engine-trl sweep's ``trl:``) trains, in groupscale's names, with TRL's defaults
    where it names none (TRL_DEFAULTS): what ``recommend --format verl`` exports for such a sweep. The learning rate
    is left at groupscale's default (an export does not carry it over).

    Raises:
        ValueError: a setting groupscale has no name for (a loss_type or scale_rewards it does not run), naming it.
    """
    names = [k for k in (*TRL_ALIASES, "temperature") if k != "learning_rate"]
    given = {k: trl_value(recipe[k]) for k in names if recipe.get(k) is not None}
    return GRPOSpec.model_validate({**TRL_DEFAULTS, **given})


def check_divides(group_size: int, samples_per_step: int) -> None:
    allowed = valid_group_sizes(samples_per_step)
    if group_size not in allowed:
        raise ValueError(
            f"group_size {group_size} must be >= 2 and divide samples_per_step {samples_per_step}; "
            f"allowed: {', '.join(map(str, allowed)) or 'none (B < 2)'}"
        )


def trl_settings(
    group_size: int, samples_per_step: int, grpo: GRPOSpec, num_processes: int = 1
) -> tuple[dict[str, Any], list[str]]:
    """GRPOConfig keyword arguments for G and B with the sweep's loss settings, and notes on what does not carry over
    exactly. The batch settings make each generation batch of B one optimizer step on ``num_processes`` processes,
    as groupscale's trainer takes it (TRL's defaults would make B = 48 six steps of 8, and refuse B = 12).
    Raises ValueError unless G >= 2 divides B and B is a whole number of completions per process."""
    check_divides(group_size, samples_per_step)
    settings: dict[str, Any] = {
        "num_generations": group_size,
        **structure_for({}, samples_per_step, num_processes).config(),  # one optimizer step per generation batch
        "loss_type": TO_TRL_LOSS[grpo.loss_aggregation],
        "epsilon": grpo.clip_eps,
        "beta": grpo.kl_beta,
        "num_iterations": grpo.inner_steps,
        "temperature": grpo.temperature,
        "max_completion_length": grpo.max_new_tokens,
    }
    if grpo.clip_eps_high is not None:
        settings["epsilon_high"] = grpo.clip_eps_high
    notes = [
        f"for {num_processes} process(es): per_device_train_batch_size x processes x gradient_accumulation_steps = B, one "
        "optimizer step per generation (lower per_device_train_batch_size and raise gradient_accumulation_steps to fit memory)",
        "learning_rate is not carried over: a sweep's lr is tuned for its own model",
    ]
    if grpo.advantage == "mean_std":
        settings["scale_rewards"] = "group"
    elif grpo.advantage == "mean":
        settings["scale_rewards"] = "none"
    else:
        settings["scale_rewards"] = "none"
        notes.append(
            f"advantage {grpo.advantage!r} has no GRPOConfig setting: scale_rewards none (mean baseline) is the closest; "
            "the leave-one-out advantage is that one times G/(G-1) (TRL's RLOOTrainer uses loo)"
        )
    if grpo.reward_scale != 1.0:
        notes.append(f"the sweep multiplied rewards by {grpo.reward_scale:g}: do the same in your reward functions")
    return settings, notes
