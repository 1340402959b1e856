"""verl (volcengine/verl): its ``ppo_trainer.yaml`` (generated or a hydra config) and run scripts' overrides of
``python3 -m verl.trainer.main_ppo`` in the budget vocabulary, and back.

Keys and units (verl ``verl/trainer/config/_generated_ppo_trainer.yaml``, ``verl/trainer/ppo/core_algos.py`` and
``verl/workers/actor/dp_actor.py`` at verl-project/verl@1dda039 (0.10.0.dev, 2026-08), the same defaults as at
volcengine/verl@b178a3c): ``data.train_batch_size`` counts PROMPTS per generation, each sampled
``actor_rollout_ref.rollout.n`` times (G), so B = train_batch_size x n completions; ``actor.ppo_mini_batch_size`` also
counts prompts (verl multiplies it by n), one optimizer step each: k = train_batch_size / ppo_mini_batch_size;
``actor.ppo_epochs`` is mu; ``actor.loss_agg_mode`` the aggregation (hyphens for groupscale's underscores);
``actor.policy_loss.loss_mode`` vanilla (token ratio) or gspo (sequence ratio, always aggregated seq-mean-token-mean
whatever ``loss_agg_mode`` says: core_algos.py:1605); ``algorithm.adv_estimator`` grpo (with
``norm_adv_by_std_in_grpo``: mean_std, else mean) or rloo (loo); KL as a loss (``use_kl_loss``, ``kl_loss_coef``,
``kl_loss_type`` low_var_kl = k3); ``trainer.total_training_steps`` counts generations.

Rewards (``verl/trainer/ppo/reward.py`` get_custom_reward_fn L70-86, ``verl/utils/import_utils.py`` load_module, and the
migration of the legacy keys in ``verl/experimental/reward_loop/reward_loop.py`` L57-60, @1dda039):
``reward.custom_reward_function.path`` (a file, ``file://`` too, or ``pkg://`` a module), ``.name`` (default
compute_score) and ``.reward_kwargs``; the top-level ``custom_reward_function.*`` of older configs (volcengine/verl@b178a3c,
name default compute_score) replaces them when it sets any. Without one verl scores each row by its ``data_source`` with
its built-in scorers (``verl/utils/reward_score/__init__.py``). ``data.prompt_key`` (default prompt) is the prompt column;
the ground truth is ``reward_model.ground_truth``, the verl convention's default.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from typing import Any

from sweeps.frameworks.base import Budget, Config, Framework, Refused, register_framework, whole
from sweeps.frameworks.edits import is_script
from sweeps.frameworks.files import config_of, load_mapping, nested, overrides_config, script_words, split_variables

A, R = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout."
DEFAULTS = {  # _generated_ppo_trainer.yaml@1dda039: the keys budget() reads
    "data.train_batch_size": 1024,
    "data.gen_batch_size": None,
    "data.max_response_length": 512,
    R + "n": 1,
    R + "temperature": 1.0,
    A + "ppo_mini_batch_size": 256,
    A + "ppo_epochs": 1,
    A + "loss_agg_mode": "token-mean",
    A + "policy_loss.loss_mode": "vanilla",
    A + "clip_ratio": 0.2,
    A + "clip_ratio_low": 0.2,
    A + "clip_ratio_high": 0.2,
    A + "use_kl_loss": False,
    A + "kl_loss_coef": 0.001,
    A + "kl_loss_type": "low_var_kl",
    A + "entropy_coeff": 0,
    A + "optim.lr": 1e-6,
    "algorithm.adv_estimator": "gae",
    "algorithm.norm_adv_by_std_in_grpo": True,
    "algorithm.use_kl_in_reward": False,
    "data.prompt_key": "prompt",
}
LOSS_AGG = {
    "token-mean": "token_mean",
    "seq-mean-token-mean": "seq_mean_token_mean",
    "seq-mean-token-sum-norm": "seq_mean_token_sum_norm",
}
LOSS_MODE = {"vanilla": "token", "gspo": "sequence"}
DYNAMIC = ("algorithm.filter_groups.enable", "data.gen_batch_size")  # DAPO's dynamic sampling and its oversampling


def verl_budget(config: Config, prefix: tuple[str, str, str] = ("data.", A, R)) -> Budget:
    """verl's keys (under ``prefix``: data, actor and rollout sections; EasyR1 and SkyRL reuse the rules under their
    own names through their own modules) in the vocabulary. Raises Refused."""
    data, actor, rollout = prefix
    group_size = config.number(rollout + "n", minimum=1)
    if group_size < 2:
        raise Refused(rollout + "n", group_size, "GRPO samples G >= 2 completions per prompt; set it to the G you train")
    prompts = config.number(data + "train_batch_size", minimum=1)
    dynamic = filter_groups(config) if config.get("algorithm.filter_groups.enable", False) is True else None
    gen = config.number("data.gen_batch_size")
    if gen is not None and gen != prompts:
        raise Refused("data.gen_batch_size", gen, f"samples {gen} prompts to train {prompts} (DAPO's oversampling); "
                      "--drop data.gen_batch_size measures G at train_batch_size alone")  # fmt: skip
    estimator = config.get("algorithm.adv_estimator")
    if estimator not in ("grpo", "rloo"):
        raise Refused("algorithm.adv_estimator", estimator, "groupscale trains critic-free group baselines; allowed: grpo, rloo")
    if config.get("algorithm.use_kl_in_reward") is True:
        raise Refused("algorithm.use_kl_in_reward", True, "a KL penalty in the reward is not trained by groupscale; use "
                      "actor_rollout_ref.actor.use_kl_loss")  # fmt: skip
    grpo: dict[str, Any] = {
        "steps_per_generation": whole(
            actor + "ppo_mini_batch_size",
            prompts,
            config.number(actor + "ppo_mini_batch_size", minimum=1),
            "optimizer steps per generation (train_batch_size / ppo_mini_batch_size)",
        ),
        "inner_steps": config.number(actor + "ppo_epochs", minimum=1),
        "loss_aggregation": config.named(actor + "loss_agg_mode", LOSS_AGG),
        "importance_sampling_level": (level := config.named(actor + "policy_loss.loss_mode", LOSS_MODE)),
        "advantage": "loo"
        if estimator == "rloo"
        else ("mean_std" if config.get("algorithm.norm_adv_by_std_in_grpo") else "mean"),
        "clip_eps": config.number(actor + "clip_ratio_low", config.get(actor + "clip_ratio"), float),
        "clip_eps_high": config.number(actor + "clip_ratio_high", config.get(actor + "clip_ratio"), float),
        "kl_beta": _kl(config, actor),
        "lr": config.number(actor + "optim.lr", kind=float),
        "temperature": config.number(rollout + "temperature", kind=float),
        "max_new_tokens": config.number(data + "max_response_length"),
    }
    if dynamic is not None:
        grpo["dynamic_sampling"] = dynamic
    if level == "sequence":  # verl's gspo aggregates so whatever loss_agg_mode says
        grpo["loss_aggregation"] = "seq_mean_token_mean"
    if config.number(actor + "entropy_coeff", 0, float):
        raise Refused(
            actor + "entropy_coeff", config.get(actor + "entropy_coeff"), "an entropy bonus is not trained by groupscale; set 0"
        )
    generations = config.number("trainer.total_training_steps")
    return Budget(
        group_size, prompts * group_size, grpo, model=config.text("actor_rollout_ref.model.path"),
        steps=None if generations is None else generations * grpo["steps_per_generation"],
        data=config.first_file(data + "train_files"), prompts={"prompt_column": str(config.get(data + "prompt_key"))},
        rewards=_rewards(config),
    )  # fmt: skip


FILTER_METRICS = ("seq_reward", "seq_final_reward", "score", "acc")  # verl's filter_groups.metric names groupscale reads


def filter_groups(config: Config) -> dict[str, int]:
    """verl's DAPO dynamic sampling (``algorithm.filter_groups``, enable true; volcengine/verl at b178a3cd,
    verl/trainer/config/algorithm.py ``FilterGroupsConfig`` and docs/algo/dapo.md) as grpo.dynamic_sampling:
    ``{max_batches: max_num_gen_batches}``.

    groupscale filters on the reward it trains. verl's ``seq_reward`` and ``score`` are that reward (the token-level
    scores summed), and so is ``seq_final_reward`` here (the rewards after a KL penalty in the reward, which verl_budget
    refuses); ``acc`` is the accuracy the reward function returns beside its score: read as the reward, said in the
    notes (the same groups for a 0/1 reward without shaping, such as DAPO's overlong penalty). verl's
    max_num_gen_batches <= 0 (its default) samples without end until the batch is full; a trial must end, so it is
    refused rather than replaced by a cap groupscale would choose. Where verl raises once the cap is spent, groupscale
    trains the informative groups it kept (workers/dynamic_sampling.py), also said in the notes.

    Raises:
        Refused: filter_groups.metric not one of FILTER_METRICS; max_num_gen_batches not a positive whole number.
    """
    key = "algorithm.filter_groups."
    metric = config.get(key + "metric")
    if metric not in FILTER_METRICS:
        raise Refused(
            key + "metric", metric, f"groupscale filters groups on the reward it trains; allowed: {', '.join(FILTER_METRICS)}"
        )
    cap = config.number(key + "max_num_gen_batches", 0)
    if cap <= 0:
        raise Refused(
            key + "max_num_gen_batches", cap, "verl's <= 0 samples without limit until the batch is full, and a trial must "
            f"end: give a cap of generations per step (DAPO's recipe: 10), e.g. {key}max_num_gen_batches=10",
        )  # fmt: skip
    if metric == "acc":
        config.note(f"{key}metric acc read as the reward groupscale trains (the same groups for a 0/1 reward without shaping)")
    config.note(
        f"{key}max_num_gen_batches {cap}: a step short of train_batch_size informative groups after {cap} generations "
        "trains those it kept (verl raises)"
    )
    return {"max_batches": cap}


def _rewards(config: Config) -> list[dict[str, Any]]:
    """The custom reward function (the legacy top-level keys when set, as verl migrates them) as the task's reward;
    none: verl's built-in scorers by data_source, said."""
    legacy = any(config.get(f"custom_reward_function.{key}") is not None for key in ("path", "name", "reward_kwargs"))
    section = "custom_reward_function." if legacy else "reward.custom_reward_function."
    path = config.text(section + "path")
    if path is None:
        config.assumed.append("no custom_reward_function: verl scores each row by its data_source with its built-in scorers "
                              "(verl/utils/reward_score/): fill in task.rewards with the one your data takes")  # fmt: skip
        return []
    if path.startswith("pkg://"):  # a module: its file from the repository's root
        path = path.removeprefix("pkg://").replace(".", "/") + ".py"
    kwargs = config.get(section + "reward_kwargs") or {}
    config.used.update(key for key in config.given if key.startswith(section + "reward_kwargs."))  # read whole
    name = config.get(section + "name") or "compute_score"
    entry = {"function": f"{path.removeprefix('file://')}:{name}", "convention": "verl"}
    return [{**entry, "kwargs": kwargs} if kwargs else entry]


def _kl(config: Config, actor: str) -> float:
    if config.get(actor + "use_kl_loss") is not True:
        return 0.0
    if config.get(actor + "kl_loss_type") not in ("low_var_kl", "k3"):
        raise Refused(
            actor + "kl_loss_type", config.get(actor + "kl_loss_type"), "groupscale's KL is k3; allowed: low_var_kl, k3"
        )
    return config.number(actor + "kl_loss_coef", kind=float)


def verl_settings(group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
    """verl keys for G at B completions with ``grpo`` (steps_per_generation k may be a Fraction 1/n: n generations
    per optimizer step, one verl batch of n B). Raises Refused when verl cannot express it."""
    k = Fraction(grpo.get("steps_per_generation", 1))
    if k.numerator != 1 and k.denominator != 1:
        raise Refused("steps_per_generation", str(k), "verl's ppo_mini_batch_size must divide data.train_batch_size")
    prompts = samples_per_step // group_size * k.denominator
    if prompts % k.numerator:
        raise Refused(
            "steps_per_generation",
            str(k),
            f"{prompts} prompts per batch do not split into {k} verl mini-batches of whole prompts",
        )
    advantage = grpo.get("advantage", "loo")
    sequence = grpo.get("importance_sampling_level") == "sequence"
    if sequence and grpo.get("loss_aggregation") != "seq_mean_token_mean":
        raise Refused("loss_aggregation", grpo.get("loss_aggregation"), "verl's gspo aggregates seq-mean-token-mean only")
    if advantage not in ("loo", "mean", "mean_std"):
        raise Refused("advantage", advantage, "verl's estimators are grpo (mean, mean_std) and rloo (loo)")
    out = {
        "algorithm.adv_estimator": "rloo" if advantage == "loo" else "grpo",
        R + "n": group_size,
        "data.train_batch_size": prompts,
        A + "ppo_mini_batch_size": prompts // k.numerator,
        A + "ppo_epochs": grpo.get("inner_steps", 1),
        A + "loss_agg_mode": {v: k for k, v in LOSS_AGG.items()}[grpo.get("loss_aggregation", "seq_mean_token_mean")],
        A + "policy_loss.loss_mode": {v: k for k, v in LOSS_MODE.items()}[grpo.get("importance_sampling_level", "token")],
        A + "clip_ratio_low": grpo.get("clip_eps", 0.2),
        A + "clip_ratio_high": grpo.get("clip_eps_high") or grpo.get("clip_eps", 0.2),
        R + "temperature": grpo.get("temperature", 1.0),
        "data.max_response_length": grpo.get("max_new_tokens"),
    }
    if advantage != "loo":
        out["algorithm.norm_adv_by_std_in_grpo"] = advantage == "mean_std"
    kl = grpo.get("kl_beta", 0.0)
    out[A + "use_kl_loss"] = kl > 0
    if kl > 0:
        out |= {A + "kl_loss_coef": kl, A + "kl_loss_type": "low_var_kl"}  # k3, the estimator groupscale uses
    return out


@register_framework
class Verl(Framework):
    name = "verl"
    title = "verl"
    files = "a ppo_trainer.yaml (generated or hydra), or a run script of python3 -m verl.trainer.main_ppo"
    version = "verl-project/verl@1dda039, 0.10.0.dev"
    launch = re.compile(r"verl\.trainer\.main_ppo|recipe\.dapo\.main_dapo")  # the DAPO recipe trains verl too
    tied = (R + "n", "data.train_batch_size", A + "ppo_mini_batch_size")

    def read(self, path: Path, overrides: list[str]) -> Config:
        text = path.read_text()
        variables, items = split_variables(overrides)
        layers: list[tuple[Any, bool]] = [(nested(DEFAULTS), False)]
        source = str(path.name)
        assumed: tuple[str, ...] = ()
        if is_script(path, text) and self.launch is not None:
            script = script_words(path, self.launch, variables)
            config_file, words = _hydra_config(path.parent, script.words)
            if config_file is not None:
                layers.append((load_mapping(config_file), True))
            layers.append((overrides_config([w for w in words if "=" in w and not w.startswith("-")])[0], True))
            assumed = tuple(script.assumed)
        else:
            layers.append((load_mapping(path), True))
        layers.append((overrides_config(items)[0], True))
        return config_of(layers, source, assumed)

    def recognises(self, data: dict[str, Any]) -> bool:
        return "actor_rollout_ref" in data

    def budget(self, config: Config) -> Budget:
        return verl_budget(config)

    def settings(self, group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
        return verl_settings(group_size, samples_per_step, grpo)


def _hydra_config(folder: Path, words: list[str]) -> tuple[Path | None, list[str]]:
    """A command's ``--config-path``/``--config-name`` (hydra) as the file they name, if it is here, and the other words."""
    options: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(words):
        flag, eq, value = words[i].partition("=")
        if flag in ("--config-path", "--config-name"):
            options[flag], i = (value, i + 1) if eq else (words[i + 1] if i + 1 < len(words) else "", i + 2)
        else:
            rest, i = [*rest, words[i]], i + 1
    name = options.get("--config-name")
    if not name:
        return None, rest
    file = folder / options.get("--config-path", ".") / (name if name.endswith(".yaml") else f"{name}.yaml")
    return (file if file.is_file() else None), rest
