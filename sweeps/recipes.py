"""Translation between groupscale's GRPO settings and TRL's GRPOConfig or verl's hydra overrides.

The answer of a sweep ("use G at budget B") becomes a TRL ``GRPOConfig`` snippet (``trl_config``) or
verl overrides (``verl_overrides``) carrying the sweep's loss settings, so the run that uses G trains
the objective G was measured for (a recipe into a spec: sweeps.from_trl).

Names: TRL ``trl/trainer/grpo_config.py`` (num_generations, generation_batch_size, loss_type,
scale_rewards, epsilon, epsilon_high, beta, num_iterations); verl ``verl/trainer/config/ppo_trainer.yaml``
(actor_rollout_ref.rollout.n, data.train_batch_size counted in prompts, actor.ppo_mini_batch_size
also in prompts, actor.loss_agg_mode, algorithm.norm_adv_by_std_in_grpo, algorithm.adv_estimator).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from sweeps.from_trl import TRL_DEFAULTS, trl_value
from sweeps.planner import prompts_per_step
from sweeps.spec import TRL_ALIASES, TRL_LOSS_TYPES, GRPOSpec, SweepSpec, valid_group_sizes
from sweeps.trl_steps import structure_for
from sweeps.yamlfile import dump_yaml

# our loss_aggregation -> TRL loss_type (dapo for token_mean: TRL's default and its global-token normaliser)
TO_TRL_LOSS = {"seq_mean_token_mean": "grpo", "token_mean": "dapo", "seq_mean_token_sum_norm": "dr_grpo"}
TO_VERL_LOSS = {
    "seq_mean_token_mean": "seq-mean-token-mean",
    "token_mean": "token-mean",
    "seq_mean_token_sum_norm": "seq-mean-token-sum-norm",
}
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


def _check(group_size: int, samples_per_step: int) -> None:
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
    _check(group_size, samples_per_step)
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


def trl_config(group_size: int, samples_per_step: int, spec: SweepSpec, header: str = "", num_processes: int = 1) -> str:
    """The answer as YAML that ``trl grpo --config`` reads (or ``GRPOConfig(**yaml.safe_load(text))``): for an engine-trl
    sweep, the user's recipe with num_generations = G and the batch settings that give B with the recipe's optimizer
    steps per generation on ``num_processes`` processes; else trl_settings."""
    if spec.engine == "trl":
        structure = structure_for(spec.trl_recipe, samples_per_step, num_processes)
        settings = {k: v for k, v in spec.trl_recipe.items() if k != "steps_per_generation"}
        settings |= {"num_generations": group_size, **structure.config()}
        notes = [structure.describe(), "the recipe as swept, with the measured G and B"]
    else:
        settings, notes = trl_settings(group_size, samples_per_step, spec.grpo, num_processes)
    lines = [f"# {line}" for line in header.splitlines()] + [f"# note: {n}" for n in notes]
    return "\n".join(lines + [dump_yaml(settings).rstrip()]) + "\n"


def verl_overrides(
    group_size: int, samples_per_step: int, grpo: GRPOSpec, optimizer_steps_per_generation: Fraction = Fraction(1)
) -> tuple[list[str], list[str]]:
    """verl hydra overrides (``key=value``) for G and B with the sweep's loss settings, and notes.

    verl counts prompts: data.train_batch_size = B / G; ppo_mini_batch_size = B / (G k) makes k optimizer steps per
    batch per epoch (k = 1 for groupscale's trainer; an engine-trl recipe's ``optimizer_steps_per_generation``), and
    ppo_epochs = inner_steps. A recipe with k = 1/n (n generations per optimizer step, all from the same weights) is
    one rollout batch of n B completions and one step in verl, whose mini-batch cannot exceed its batch.

    Raises:
        ValueError: G < 2 or G does not divide B; k is neither whole nor 1/n, or B / (G k) is not a whole number of
            prompts (verl's mini-batches are whole prompts that divide the batch).
    """
    _check(group_size, samples_per_step)
    k = optimizer_steps_per_generation
    if k.numerator != 1 and k.denominator != 1:
        raise ValueError(f"{k} optimizer steps per generation: verl's ppo_mini_batch_size must divide data.train_batch_size")
    prompts = prompts_per_step(samples_per_step, group_size) * k.denominator
    if prompts % k.numerator:
        raise ValueError(f"{prompts} prompts per batch do not split into {k} verl mini-batches of whole prompts")
    out = [
        "algorithm.adv_estimator=" + ("rloo" if grpo.advantage == "loo" else "grpo"),
        f"actor_rollout_ref.rollout.n={group_size}",
        f"data.train_batch_size={prompts}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts // k.numerator}",
        f"actor_rollout_ref.actor.ppo_epochs={grpo.inner_steps}",
        f"actor_rollout_ref.actor.loss_agg_mode={TO_VERL_LOSS[grpo.loss_aggregation]}",
        f"actor_rollout_ref.actor.clip_ratio_low={grpo.clip_eps:g}",
        f"actor_rollout_ref.actor.clip_ratio_high={(grpo.clip_eps_high or grpo.clip_eps):g}",
        f"actor_rollout_ref.rollout.temperature={grpo.temperature:g}",
        f"data.max_response_length={grpo.max_new_tokens}",
    ]
    if grpo.advantage != "loo":
        out.append(f"algorithm.norm_adv_by_std_in_grpo={grpo.advantage == 'mean_std'}")
    if grpo.kl_beta > 0:
        out += [
            "actor_rollout_ref.actor.use_kl_loss=True",
            f"actor_rollout_ref.actor.kl_loss_coef={grpo.kl_beta:g}",
            "actor_rollout_ref.actor.kl_loss_type=low_var_kl",  # k3, the estimator groupscale uses
        ]
    else:
        out.append("actor_rollout_ref.actor.use_kl_loss=False")
    notes = ["actor_rollout_ref.actor.optim.lr is not carried over: a sweep's lr is tuned for its own model"]
    if k.denominator > 1:
        notes.append(f"the recipe's {k.denominator} generations of B = {samples_per_step} per optimizer step are one verl batch")
    if grpo.advantage == "oracle":
        notes.append("advantage 'oracle' (exact expected reward baseline) has no verl estimator: rloo is the closest")
    return out, notes
