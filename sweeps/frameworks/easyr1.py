"""EasyR1 (hiyouga/EasyR1): its ``examples/config.yaml`` and run scripts of ``python3 -m verl.trainer.main
config=examples/config.yaml key=value ...`` (EasyR1's own ``verl`` package: ``verl.trainer.main``, not verl's
``main_ppo``) in the budget vocabulary, and back.

Loading (``verl/trainer/main.py``, hiyouga/EasyR1@b44b311, 2026-07): the dataclass defaults (``PPOConfig``), the
``config=`` file over them, the other ``key=value`` words over that (OmegaConf, no interpolations).

Keys and units (``verl/trainer/config.py``, ``verl/workers/actor/config.py``, ``verl/workers/rollout/config.py``,
``verl/trainer/core_algos.py``, ``verl/workers/actor/dp_actor.py``, all @b44b311): ``data.rollout_batch_size`` counts
PROMPTS per generation (verl's train_batch_size), each sampled ``worker.rollout.n`` (G) times: B = prompts x G;
``worker.actor.global_batch_size`` counts prompts too (the worker multiplies it by n), one optimizer step each: k =
rollout_batch_size / global_batch_size; ``worker.actor.ppo_epochs`` is mu. ``loss_avg_mode`` token is a token mean over
the mini-batch; seq is a sequence mean of token means per micro-batch, each micro-batch's loss then weighted by its
share of the mini-batch's tokens (dp_actor.py), read as seq_mean_token_mean and said in the notes. ``loss_type``
default is the token ratio, gspo and gspo_token the sequence ratio (GSPO). Advantages: grpo (r - mean) / (std + 1e-6),
ddof 1 (mean_std); rloo (loo). KL: none with ``algorithm.disable_kl``; a loss term with ``use_kl_loss``
(``kl_penalty`` low_var_kl, k3 clamped to [-10, 10], the clamp inert near the reference); else a reward penalty
(refused). The default dual clip (``clip_ratio_dual`` 3.0: the loss of a token with A < 0 stops growing past a ratio of
3) is kept as inert: fresh samples' ratios stay near 1 within a generation's k steps; another value is refused.

Rewards (``verl/workers/reward/config.py`` L26-40, ``verl/trainer/config.py`` L39-40, ``verl/utils/dataset.py`` L158,
L313, @b44b311): ``worker.reward.reward_function`` is ``FILE.py:NAME`` (NAME ``main`` when no ``:`` is given, FILE
from the directory the run starts in), called with ``worker.reward.reward_function_kwargs``; ``data.prompt_key``
(default ``prompt``) and ``data.answer_key`` (default ``answer``, its ground_truth) are the columns.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from typing import Any

from sweeps.frameworks.base import Budget, Config, Framework, Refused, register_framework, whole
from sweeps.frameworks.edits import is_script
from sweeps.frameworks.expansion import shown, unknown_in
from sweeps.frameworks.files import config_of, find_near, load_mapping, nested, overrides_config, script_words, split_variables

A, R = "worker.actor.", "worker.rollout."
DEFAULTS = {  # the dataclasses' defaults @b44b311 (config.py, actor/config.py, rollout/config.py): the keys budget() reads
    "data.rollout_batch_size": 512,
    "data.max_response_length": 512,
    "data.train_files": "",
    R + "n": 1,
    R + "temperature": 1.0,
    A + "global_batch_size": 256,
    A + "ppo_epochs": 1,
    A + "loss_avg_mode": "token",
    A + "loss_type": "default",
    A + "clip_ratio_low": 0.2,
    A + "clip_ratio_high": 0.3,
    A + "clip_ratio_dual": 3.0,
    A + "optim.lr": 1e-6,
    A + "model.model_path": None,
    "algorithm.adv_estimator": "grpo",
    "algorithm.disable_kl": False,
    "algorithm.use_kl_loss": False,
    "algorithm.kl_penalty": "kl",
    "algorithm.kl_coef": 1e-3,
    "algorithm.online_filtering": False,
    "trainer.max_steps": None,
    "data.prompt_key": "prompt",
    "data.answer_key": "answer",
    "worker.reward.reward_function": None,
}
DUAL_CLIP = 3.0  # EasyR1's default clip_ratio_dual, kept as inert
ESTIMATORS = {"grpo": "mean_std", "rloo": "loo"}
LOSS_AVG = {"token": "token_mean", "seq": "seq_mean_token_mean"}
LOSS_TYPE = {"default": "token", "gspo": "sequence", "gspo_token": "sequence"}


def easyr1_budget(config: Config) -> Budget:
    """EasyR1's keys in the vocabulary. Raises Refused."""
    group_size = config.number(R + "n", minimum=1)
    if group_size < 2:
        raise Refused(R + "n", group_size, "GRPO samples G >= 2 completions per prompt; set it to the G you train")
    prompts = config.number("data.rollout_batch_size", minimum=1)
    if config.get("algorithm.online_filtering") is True:
        raise Refused("algorithm.online_filtering", True, "online filtering keeps only the groups whose mean reward lies "
                      "between filter_low and filter_high and generates again until rollout_batch_size prompts are kept, so "
                      "the prompts that train depend on G, which groupscale's trainer does not do; --drop "
                      "algorithm.online_filtering measures G without it (every sampled group trains)")  # fmt: skip
    estimator = config.get("algorithm.adv_estimator")
    if estimator not in ESTIMATORS:
        raise Refused("algorithm.adv_estimator", estimator, "groupscale trains critic-free group baselines; allowed: grpo, rloo")
    dual = config.number(A + "clip_ratio_dual", kind=float)
    if dual is not None and dual != DUAL_CLIP:
        raise Refused(A + "clip_ratio_dual", dual, f"a dual clip other than EasyR1's default {DUAL_CLIP:g} (kept as inert) "
                      f"is not in groupscale's PPO-clip loss; --drop {A}clip_ratio_dual measures G without it")  # fmt: skip
    aggregation = config.named(A + "loss_avg_mode", LOSS_AVG)
    if aggregation == "seq_mean_token_mean":
        config.assumed.append(
            "loss_avg_mode seq read as seq_mean_token_mean: EasyR1 weights each micro-batch's sequence mean by its share "
            "of the mini-batch's tokens (dp_actor.py), the same for equal micro-batches"
        )
    grpo: dict[str, Any] = {
        "steps_per_generation": whole(A + "global_batch_size", prompts, config.number(A + "global_batch_size", minimum=1),
                                      "optimizer steps per generation (rollout_batch_size / global_batch_size)"),
        "inner_steps": config.number(A + "ppo_epochs", minimum=1),
        "loss_aggregation": aggregation,
        "importance_sampling_level": config.named(A + "loss_type", LOSS_TYPE),
        "advantage": ESTIMATORS[estimator],
        "clip_eps": config.number(A + "clip_ratio_low", kind=float),
        "clip_eps_high": config.number(A + "clip_ratio_high", kind=float),
        "kl_beta": _kl(config),
        "lr": config.number(A + "optim.lr", kind=float),
        "temperature": config.number(R + "temperature", kind=float),
        "max_new_tokens": config.number("data.max_response_length"),
    }  # fmt: skip
    steps = config.number("trainer.max_steps")
    # RLHFDataset (verl/utils/dataset.py) renders data.format_prompt with content, then the chat template, always
    template = config.text("data.format_prompt")
    return Budget(group_size, prompts * group_size, grpo, model=config.text(A + "model.model_path"),
                  steps=None if steps is None else steps * grpo["steps_per_generation"],
                  data=config.first_file("data.train_files"), rewards=_rewards(config),
                  prompts={"prompt_format": "chat", "prompt_column": str(config.get("data.prompt_key")),
                           **({"prompt_template": template} if template else {})})  # fmt: skip


def _rewards(config: Config) -> list[dict[str, Any]]:
    """worker.reward.reward_function as the task's reward, its kwargs and answer column."""
    function = config.text("worker.reward.reward_function")
    if function is None:
        return []
    file, _, name = function.rpartition(":") if ":" in function else (function, "", "main")
    kwargs = config.get("worker.reward.reward_function_kwargs") or {}
    config.used.update(key for key in config.given if key.startswith("worker.reward.reward_function_kwargs."))  # read whole
    return [{"function": f"{file}:{name}", "convention": "easyr1", "answer_column": str(config.get("data.answer_key")),
             **({"kwargs": kwargs} if kwargs else {})}]  # fmt: skip


def _kl(config: Config) -> float:
    beta = config.number("algorithm.kl_coef", 0.0, float)
    if config.get("algorithm.disable_kl") is True or not beta:
        return 0.0
    if config.get("algorithm.use_kl_loss") is not True:
        raise Refused("algorithm.kl_coef", beta, "without algorithm.use_kl_loss the KL is a reward penalty, which "
                      "groupscale does not train; set algorithm.use_kl_loss=true, or --drop algorithm.kl_coef measures G "
                      "without a KL")  # fmt: skip
    if config.get("algorithm.kl_penalty") != "low_var_kl":
        raise Refused("algorithm.kl_penalty", config.get("algorithm.kl_penalty"), "groupscale's KL is k3; allowed: low_var_kl")
    return beta


def easyr1_settings(group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
    """EasyR1 keys for G at B completions with ``grpo`` (k may be a Fraction 1/n: n generations per optimizer step,
    one EasyR1 batch of n B, as verl's). Raises Refused when EasyR1 cannot express it."""
    k = Fraction(grpo.get("steps_per_generation", 1))
    prompts = samples_per_step // group_size * k.denominator
    if (k.numerator != 1 and k.denominator != 1) or prompts % k.numerator:
        raise Refused("steps_per_generation", str(k), f"{prompts} prompts do not split into {k} EasyR1 mini-batches of "
                      "whole prompts (global_batch_size must divide rollout_batch_size)")  # fmt: skip
    estimator = {v: k for k, v in ESTIMATORS.items()}.get(grpo.get("advantage", "loo"))
    if estimator is None:
        raise Refused("advantage", grpo.get("advantage"), "EasyR1's estimators are grpo (mean_std) and rloo (loo)")
    aggregation = {v: k for k, v in LOSS_AVG.items()}.get(grpo.get("loss_aggregation", "seq_mean_token_mean"))
    if aggregation is None:
        raise Refused("loss_aggregation", grpo.get("loss_aggregation"), "EasyR1 averages by token or seq")
    kl = grpo.get("kl_beta", 0.0)
    out = {
        R + "n": group_size,
        "data.rollout_batch_size": prompts,
        A + "global_batch_size": prompts // k.numerator,
        A + "ppo_epochs": grpo.get("inner_steps", 1),
        "algorithm.adv_estimator": estimator,
        A + "loss_avg_mode": aggregation,
        A + "loss_type": "gspo" if grpo.get("importance_sampling_level") == "sequence" else "default",
        A + "clip_ratio_low": grpo.get("clip_eps", 0.2),
        A + "clip_ratio_high": grpo.get("clip_eps_high") or grpo.get("clip_eps", 0.2),
        R + "temperature": grpo.get("temperature", 1.0),
        "algorithm.disable_kl": not kl > 0,
    }
    if kl > 0:
        out |= {"algorithm.use_kl_loss": True, "algorithm.kl_penalty": "low_var_kl", "algorithm.kl_coef": kl}
    if grpo.get("max_new_tokens") is not None:
        out["data.max_response_length"] = grpo["max_new_tokens"]
    return out


@register_framework
class EasyR1(Framework):
    name = "easyr1"
    title = "EasyR1"
    files = "its config.yaml, or a run script of python3 -m verl.trainer.main config=X.yaml"
    version = "hiyouga/EasyR1@b44b311, 2026-07"
    launch = re.compile(r"verl\.trainer\.main\b(?!\.py)")  # EasyR1's; verl's own is verl.trainer.main_ppo
    tied = (R + "n", "data.rollout_batch_size", A + "global_batch_size")

    def read(self, path: Path, overrides: list[str]) -> Config:
        text = path.read_text()
        variables, items = split_variables(overrides)
        layers: list[tuple[Any, bool]] = [(nested(DEFAULTS), False)]
        assumed: list[str] = []
        if is_script(path, text) and self.launch is not None:
            script = script_words(path, self.launch, variables)
            words = [w for w in script.words if "=" in w and not w.startswith("-")]
            files = [w.partition("=")[2] for w in words if w.partition("=")[0] == "config"]
            assumed += script.assumed
            if files:
                layers.append((load_mapping(_config_file(path, files[-1])), True))
            else:
                assumed.append("no config=: read with EasyR1's dataclass defaults")
            layers.append((overrides_config([w for w in words if w.partition("=")[0] != "config"])[0], True))
        else:
            layers.append((load_mapping(path), True))
        layers.append((overrides_config(items)[0], True))
        return config_of(layers, path.name, tuple(assumed))

    def recognises(self, data: dict[str, Any]) -> bool:
        return isinstance(data.get("worker"), dict) and "actor_rollout_ref" not in data

    def budget(self, config: Config) -> Budget:
        return easyr1_budget(config)

    def settings(self, group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
        return easyr1_settings(group_size, samples_per_step, grpo)


def _config_file(script: Path, name: str) -> Path:
    """A script's ``config=`` file (relative to the repository root its scripts run from). Raises ValueError."""
    if unknown_in(name):
        raise Refused("config", shown(name), f"depends on {', '.join(unknown_in(name))}, which only running the script "
                      "tells; give the variable after the file (NAME=value)")  # fmt: skip
    file = find_near(script.parent, name)
    if file is None:
        raise ValueError(f"{script}: its config={name} is not here (looked in {script.parent} and the folders above)")
    return file
