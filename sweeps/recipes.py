"""Translation between groupscale's GRPO settings and TRL's GRPOConfig or verl's hydra overrides.

The answer of a sweep ("use G at budget B") becomes a TRL ``GRPOConfig`` snippet (``trl_config``) or
verl overrides (``verl_overrides``) carrying the sweep's loss settings, so the run that uses G trains
the objective G was measured for; a TRL recipe becomes a sweep spec (``spec_from_trl``).

Names: TRL ``trl/trainer/grpo_config.py`` (num_generations, generation_batch_size, loss_type,
scale_rewards, epsilon, epsilon_high, beta, num_iterations); verl ``verl/trainer/config/ppo_trainer.yaml``
(actor_rollout_ref.rollout.n, data.train_batch_size counted in prompts, actor.ppo_mini_batch_size
also in prompts, actor.loss_agg_mode, algorithm.norm_adv_by_std_in_grpo, algorithm.adv_estimator).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sweeps.spec import TRL_ALIASES, TRL_LOSS_TYPES, GRPOSpec, valid_group_sizes

# our loss_aggregation -> TRL loss_type (dapo for token_mean: TRL's default and its global-token normaliser)
TO_TRL_LOSS = {"seq_mean_token_mean": "grpo", "token_mean": "dapo", "seq_mean_token_sum_norm": "dr_grpo"}
TO_VERL_LOSS = {
    "seq_mean_token_mean": "seq-mean-token-mean",
    "token_mean": "token-mean",
    "seq_mean_token_sum_norm": "seq-mean-token-sum-norm",
}
assert set(TO_TRL_LOSS.values()) <= set(TRL_LOSS_TYPES)


def _check(group_size: int, samples_per_step: int) -> None:
    allowed = valid_group_sizes(samples_per_step)
    if group_size not in allowed:
        raise ValueError(
            f"group_size {group_size} must be >= 2 and divide samples_per_step {samples_per_step}; "
            f"allowed: {', '.join(map(str, allowed)) or 'none (B < 2)'}"
        )


def trl_settings(group_size: int, samples_per_step: int, grpo: GRPOSpec) -> tuple[dict[str, Any], list[str]]:
    """GRPOConfig keyword arguments for G and B with the sweep's loss settings, and notes on what does
    not carry over exactly. Raises ValueError unless G >= 2 divides B."""
    _check(group_size, samples_per_step)
    settings: dict[str, Any] = {
        "num_generations": group_size,
        "generation_batch_size": samples_per_step,  # completions per generation batch = B (one optimizer step each)
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
        "generation_batch_size must be a multiple of per_device_train_batch_size x processes (TRL checks it)",
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


def trl_config(group_size: int, samples_per_step: int, grpo: GRPOSpec, header: str = "") -> str:
    """trl_settings as YAML that ``trl grpo --config`` reads (or ``GRPOConfig(**yaml.safe_load(text))``)."""
    settings, notes = trl_settings(group_size, samples_per_step, grpo)
    lines = [f"# {line}" for line in header.splitlines()] + [f"# note: {n}" for n in notes]
    return "\n".join(lines + [yaml.safe_dump(settings, sort_keys=False).rstrip()]) + "\n"


def verl_overrides(group_size: int, samples_per_step: int, grpo: GRPOSpec) -> tuple[list[str], list[str]]:
    """verl hydra overrides (``key=value``) for G and B with the sweep's loss settings, and notes.

    verl counts prompts: data.train_batch_size = B / G; ppo_mini_batch_size = B / G makes one optimizer
    step per batch per epoch, as groupscale does, and ppo_epochs = inner_steps. Raises ValueError
    unless G >= 2 divides B.
    """
    _check(group_size, samples_per_step)
    prompts = samples_per_step // group_size
    out = [
        "algorithm.adv_estimator=" + ("rloo" if grpo.advantage == "loo" else "grpo"),
        f"actor_rollout_ref.rollout.n={group_size}",
        f"data.train_batch_size={prompts}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts}",
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
    if grpo.advantage == "oracle":
        notes.append("advantage 'oracle' (exact expected reward baseline) has no verl estimator: rloo is the closest")
    return out, notes


# TRL config keys that spec_from_trl maps (besides TRL_ALIASES) or reads for the budget
_TRL_READ = {"temperature", "model_name_or_path", "generation_batch_size", "num_generations", "max_steps"}
_TRL_BATCH = ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation")


def _whole(config: dict[str, Any], key: str, minimum: int) -> int | None:
    """config[key] as an int >= minimum (None when absent). Raises ValueError naming the key."""
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{key}: {value!r} is not a whole number >= {minimum}")
    return value


def _budget(config: dict[str, Any]) -> int | None:
    """B of a TRL config: generation_batch_size, else per_device_train_batch_size x gradient_accumulation_steps
    (x steps_per_generation when given) on one process, as GRPOConfig computes it. Raises ValueError
    naming a field that is not a positive whole number."""
    given = _whole(config, "generation_batch_size", 2)
    per_device = _whole(config, "per_device_train_batch_size", 1)
    steps = _whole(config, "steps_per_generation", 1) or _whole(config, "gradient_accumulation_steps", 1) or 1
    if given is not None:
        return given
    return None if per_device is None else per_device * steps


def spec_from_trl(
    config: dict[str, Any],
    group_sizes: list[int],
    seeds: int = 3,
    steps: int | None = None,
    model: str | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """A sweep spec (plain data, for SweepSpec.model_validate) from a TRL GRPO config, and what was not mapped.

    Args:
        config: the YAML ``trl grpo --config`` reads, or a ``GRPOConfig`` dump (``to_dict()``).
        group_sizes: the G to sweep; each must divide B.
        seeds: seeds per (G, B); steps: T (default: the recipe's max_steps when > 0, else 200).
        model: a local model folder (default: the recipe's model_name_or_path; a GRPOConfig dump has none).
    Returns:
        (spec dict, lines "key: value (why not mapped)"). The task is left for the user to fill: TRL
        names a hub dataset and reward functions by import path, which groupscale does not load.
    Raises:
        ValueError: no model, no budget, a G that does not divide B, a GRPO value groupscale refuses
            (an invalid one, loss_type cispo, scale_rewards batch, ...), a count that is not a whole
            number (each names the key and the value).
    """
    from_recipe = model is None
    model = model or config.get("model_name_or_path")
    if not model:
        raise ValueError("the TRL config names no model (model_name_or_path): pass --model with a local model folder")
    budget = _budget(config)
    if not budget:
        raise ValueError("the TRL config gives no budget: set generation_batch_size (or per_device_train_batch_size)")
    if not group_sizes or len(set(group_sizes)) != len(group_sizes) or min(group_sizes) < 2:
        raise ValueError(f"--group-sizes: {group_sizes} must be distinct whole numbers >= 2 (e.g. 2,4,8,16)")
    if budget < 2:
        raise ValueError(f"the recipe's budget B = {budget} is below 2 completions per step")
    allowed = valid_group_sizes(budget)
    bad = [g for g in group_sizes if g not in allowed]
    if bad:
        raise ValueError(f"group sizes {bad} do not divide B = {budget}; allowed: {', '.join(map(str, allowed))}")
    skipped = []
    grpo: dict[str, Any] = {}
    for key in (*TRL_ALIASES, "temperature"):
        value = config.get(key)
        if value is None:
            continue
        try:  # an invalid value, or a TRL setting groupscale does not run, would change the objective: refused
            GRPOSpec.model_validate({key: value})
        except ValidationError as e:
            raise ValueError(f"{key}: {value!r}: {e.errors()[0]['msg'].removeprefix('Value error, ')}") from None
        grpo[key] = value
    max_steps = _whole(config, "max_steps", -1)
    spec = {
        "name": f"from-trl-{str(model).rstrip('/').split('/')[-1]}",
        "task": {
            "name": "dataset",
            "path": "FILL IN: a local data file (jsonl, parquet, ...)",
            "prompt_column": "prompt",
            "rewards": [{"function": "FILL IN: rewards.py:NAME"}],
        },
        "model": {"path": str(model)},
        "group_sizes": sorted(group_sizes),
        "samples_per_step": [budget],
        "seeds": list(range(seeds)),
        "steps": steps or (max_steps if max_steps and max_steps > 0 else 200),
        "grpo": GRPOSpec.model_validate(grpo).model_dump(include={TRL_ALIASES.get(k, k) for k in grpo}),
    }
    why = {
        "dataset_name": "a hub dataset id: groupscale reads local files only; set task.path",
        "reward_funcs": "TRL imports reward functions by name; set task.rewards to FILE.py:NAME or a built-in",
    }
    mapped = {*TRL_ALIASES, *_TRL_READ, *_TRL_BATCH}
    skipped += [f"{k}: {config[k]!r} ({why.get(k, 'not a setting a sweep varies or keeps')})" for k in config if k not in mapped]
    if from_recipe and not Path(str(model)).expanduser().is_dir():
        skipped.append(
            f"model_name_or_path: {model!r} is not a local folder here: groupscale never downloads weights; download it "
            f"(e.g. `hf download {model} --local-dir DIR`) and pass --model DIR, or set model.path"
        )
    recipe_g = _whole(config, "num_generations", 2)
    if recipe_g and recipe_g not in group_sizes:
        skipped.append(f"num_generations: {recipe_g} (the recipe's own G is not among --group-sizes; add it to compare)")
    return spec, skipped
