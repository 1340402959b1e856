"""OpenRLHF (OpenRLHF/OpenRLHF): the flags of ``python3 -m openrlhf.cli.train_ppo_ray`` in its run scripts, dotted
(0.10.2 on) or flat (before), in the budget vocabulary, and back.

Keys and units (``openrlhf/cli/train_ppo_ray.py`` @3c3be623 (0.11.0) and PyPI 0.11.2; the flat names renamed at
ed62d0e2, 2026-04-19): ``--rollout.batch_size`` counts PROMPTS a generation (``samples_generator.py:100``), each sampled
``--rollout.n_samples_per_prompt`` (G) times: B = batch_size x G; ``--train.batch_size`` counts COMPLETIONS an
optimizer step (``replay_buffer.py:102``), so k = B / train.batch_size; ``--train.max_epochs`` is mu. Advantages
(``experience_maker.py``): ``group_norm`` (r - mean) / (std + 1e-9), ddof 1 (mean_std); ``dr_grpo`` r - mean (mean);
``rloo`` (loo); ``reinforce_baseline`` whitens over the whole batch (refused: a group's advantage then depends on the
other prompts). The loss is a token mean over the optimizer step (``models/loss.py``), per sequence for gspo (and for
``--actor.loss_agg_mode seq-mean-token-mean``, 0.11.2). The KL is a loss term with ``--algo.kl.use_loss``, else a
reward penalty (refused); groupscale's KL is k3. argparse takes unambiguous prefixes of a flag, as here.

Rewards (train_ppo_ray.py L519, L542-543, L629-630; ``openrlhf/utils/agent.py`` SingleTurnAgentExecutor L187-200 and
``datasets/prompts_dataset.py`` L26-44, @3c3be623): ``--reward.remote_url`` (flat ``--remote_rm_url``) is a comma list
of reward servers that share the requests, or, when its first item ends in ``.py``, a file whose ``reward_func(queries,
prompts, labels)`` scores; ``--data.input_key`` (default ``input``) is the prompt column, ``--data.label_key`` (default
none: empty labels) the label column.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sweeps.frameworks.base import Budget, Config, Framework, Refused, register_framework, whole, word
from sweeps.frameworks.edits import edit_script, is_script
from sweeps.frameworks.files import config_of, nested, script_words, split_variables

DEFAULTS = {  # train_ppo_ray.py @3c3be623: the flags budget() reads
    "rollout.n_samples_per_prompt": 1,
    "rollout.batch_size": 1024,
    "rollout.temperature": 1.0,
    "rollout.max_new_tokens": None,
    "train.batch_size": 128,
    "train.max_epochs": 1,
    "data.max_len": 2048,
    "algo.advantage.estimator": "gae",
    "algo.kl.init_coef": 0.01,
    "algo.kl.use_loss": False,
    "algo.kl.estimator": "k1",
    "actor.eps_clip": 0.2,
    "actor.policy_loss_type": "ppo",
    "actor.loss_agg_mode": "token-mean",
    "actor.adam.lr": 1e-6,
    "data.input_key": "input",
    "data.label_key": None,
    "reward.remote_url": None,
}
RENAMED = {  # the flat flags (<= 0.10.1) budget() reads, by their dotted names (openrlhf ed62d0e2)
    "n_samples_per_prompt": "rollout.n_samples_per_prompt", "rollout_batch_size": "rollout.batch_size",
    "train_batch_size": "train.batch_size", "max_epochs": "train.max_epochs", "temperature": "rollout.temperature",
    "max_new_tokens": "rollout.max_new_tokens", "generate_max_len": "rollout.max_new_tokens", "max_len": "data.max_len",
    "advantage_estimator": "algo.advantage.estimator", "init_kl_coef": "algo.kl.init_coef", "use_kl_loss": "algo.kl.use_loss",
    "kl_estimator": "algo.kl.estimator", "eps_clip": "actor.eps_clip", "eps_clip_low_high": "actor.eps_clip_low_high",
    "dual_clip": "actor.dual_clip", "policy_loss_type": "actor.policy_loss_type", "actor_learning_rate": "actor.adam.lr",
    "entropy_loss_coef": "actor.entropy_coef", "dynamic_filtering": "algo.dynamic_filtering_enable",
    "async_train": "train.async_enable", "vllm_generate_batch_size": "rollout.vllm_generate_batch_size",
    "pretrain": "actor.model_name_or_path", "prompt_data": "data.prompt_dataset",
    "apply_chat_template": "data.apply_chat_template", "remote_rm_url": "reward.remote_url", "input_key": "data.input_key",
    "label_key": "data.label_key",
}  # fmt: skip
ESTIMATORS = {"group_norm": "mean_std", "dr_grpo": "mean", "rloo": "loo"}
LOSS_AGG = {"token-mean": "token_mean", "seq-mean-token-mean": "seq_mean_token_mean"}
REFUSED = {  # flag -> why groupscale does not train it (each with --drop)
    "algo.dynamic_filtering_enable": "dynamic filtering drops the groups whose mean reward is 0 or 1 and samples new "
    "prompts in their place, so the prompts that train depend on G, which groupscale's trainer does not do",
    "train.async_enable": "asynchronous training trains on completions of an older policy; groupscale trains on-policy",
    "actor.dual_clip": "dual clip is not in groupscale's PPO-clip loss",
}


def flags(words: list[str]) -> dict[str, Any]:
    """A command's ``--flag [value ...]`` words as {dotted name: value}: no value is True (store_true), one a
    string, more a list (nargs). Flat names of before 0.10.2 are renamed (RENAMED); an unambiguous prefix of a
    flag that budget() reads is completed, as argparse does."""
    out: dict[str, Any] = {}
    name = None
    for item in words:
        if item.startswith("--"):
            name, eq, value = item[2:].partition("=")
            name = _full(RENAMED.get(name, name))
            out[name] = value if eq else True
        elif name is not None:
            previous = out[name]
            out[name] = item if previous is True else [*(previous if isinstance(previous, list) else [previous]), item]
    return {k: {"true": True, "false": False}.get(v.lower(), v) if isinstance(v, str) else v for k, v in out.items()}


def _full(name: str) -> str:
    """A flag's full dotted name from an unambiguous prefix of one budget() reads (argparse's allow_abbrev)."""
    if name in DEFAULTS or "." not in name:
        return name
    matches = [key for key in (*DEFAULTS, *REFUSED, "actor.eps_clip_low_high") if key.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def openrlhf_budget(config: Config) -> Budget:
    """The flags in the vocabulary. Raises Refused."""
    group_size = config.number("rollout.n_samples_per_prompt", minimum=1)
    if group_size < 2:
        raise Refused("rollout.n_samples_per_prompt", group_size, "GRPO samples G >= 2 completions per prompt")
    samples = config.number("rollout.batch_size", minimum=1) * group_size
    for key, why in REFUSED.items():
        if config.get(key) not in (None, False, "false", "False"):
            raise Refused(key, config.get(key), f"{why}; --drop {key} measures G without it")
    generate = config.number("rollout.vllm_generate_batch_size")
    if generate is not None and generate != config.number("rollout.batch_size"):
        raise Refused("rollout.vllm_generate_batch_size", generate, "oversampling (asynchronous in OpenRLHF) is not "
                      "trained by groupscale; --drop rollout.vllm_generate_batch_size measures G without it")  # fmt: skip
    estimator = config.get("algo.advantage.estimator")
    if estimator not in ESTIMATORS:
        why = ("whitens the advantages over the whole batch, so a group's advantages depend on the other prompts of the "
               "step and on G, which the law of THEORY.md does not model" if estimator in ("reinforce_baseline", "reinforce")
               else "needs a critic or no group baseline")  # fmt: skip
        raise Refused("algo.advantage.estimator", estimator, f"{why}; allowed: {', '.join(ESTIMATORS)}")
    if config.number("actor.entropy_coef", 0, float):
        raise Refused("actor.entropy_coef", config.get("actor.entropy_coef"), "an entropy bonus is not trained by groupscale")
    sequence = config.get("actor.policy_loss_type") == "gspo"
    if config.get("actor.policy_loss_type") not in ("ppo", "gspo"):
        raise Refused("actor.policy_loss_type", config.get("actor.policy_loss_type"), "allowed: ppo, gspo")
    aggregation = config.get("actor.loss_agg_mode")
    if aggregation not in LOSS_AGG:
        raise Refused("actor.loss_agg_mode", aggregation, f"allowed: {', '.join(LOSS_AGG)}")
    low, high = _clip(config)
    grpo = {
        "steps_per_generation": whole("train.batch_size", samples, config.number("train.batch_size", minimum=1),
                                      "optimizer steps per generation (rollout.batch_size x G / train.batch_size)"),
        "inner_steps": config.number("train.max_epochs", minimum=1),
        "loss_aggregation": "seq_mean_token_mean" if sequence else LOSS_AGG[aggregation],
        "importance_sampling_level": "sequence" if sequence else "token",
        "advantage": ESTIMATORS[estimator],
        "clip_eps": low,
        "clip_eps_high": high,
        "kl_beta": _kl(config),
        "lr": config.number("actor.adam.lr", kind=float),
        "temperature": config.number("rollout.temperature", kind=float),
        "max_new_tokens": config.number("rollout.max_new_tokens") or _total_length(config),
    }  # fmt: skip
    model, data = config.text("actor.model_name_or_path"), config.text("data.prompt_dataset")
    # PromptDataset (openrlhf/datasets/prompts_dataset.py) templates a prompt only under --data.apply_chat_template
    chat = config.get("data.apply_chat_template") not in (None, False, "false", "False")
    prompts = {"prompt_format": "chat" if chat else "raw", "prompt_column": config.get("data.input_key")}
    return Budget(group_size, samples, grpo, model=model, data=data, prompts=prompts, rewards=_rewards(config))


def _rewards(config: Config) -> list[dict[str, Any]]:
    """--reward.remote_url as the task's reward: a file's reward_func, or the first of its servers (said)."""
    where = config.get("reward.remote_url")
    label = {"answer_column": str(config.get("data.label_key"))} if config.get("data.label_key") is not None else {}
    if where is None or where is True:
        return []
    first, *rest = str(where).split(",")
    if rest:
        config.assumed.append(f"--reward.remote_url names {len(rest) + 1} servers that share its requests: the spec asks "
                              "the first for every one")  # fmt: skip
    if first.endswith(".py"):
        return [{"function": f"{first}:reward_func", "convention": "openrlhf", **label}]
    if not re.match(r"https?://", first):
        config.assumed.append(f"--reward.remote_url {first!r} is neither a .py file nor an http(s) server: fill in task.rewards")
        return []
    config.assumed.append(f"the reward server {first} is called from the Ray workers: the controller takes it when "
                          "GROUPSCALE_REWARD_URLS holds a prefix of it")  # fmt: skip
    return [{"url": first, "request": "openrlhf", **label}]


def _total_length(config: Config) -> int:
    """No --rollout.max_new_tokens: OpenRLHF generates up to --data.max_len less the prompt; that bound, said."""
    config.assumed.append("no --rollout.max_new_tokens: the cap is --data.max_len (prompt and completion), an upper bound")
    return config.number("data.max_len", minimum=1)


def _clip(config: Config) -> tuple[float, float]:
    pair = config.get("actor.eps_clip_low_high")
    if pair is None:
        eps = config.number("actor.eps_clip", kind=float)
        return eps, eps
    if not isinstance(pair, list) or len(pair) != 2:
        raise Refused("actor.eps_clip_low_high", pair, "takes two numbers, low and high")
    try:
        return float(pair[0]), float(pair[1])
    except ValueError:
        raise Refused("actor.eps_clip_low_high", pair, "takes two numbers, low and high") from None


def _kl(config: Config) -> float:
    beta = config.number("algo.kl.init_coef", kind=float)
    if not beta:
        return 0.0
    if config.get("algo.kl.use_loss") is not True:
        raise Refused("algo.kl.init_coef", beta, "without --algo.kl.use_loss the KL is a reward penalty, which groupscale "
                      "does not train; add --algo.kl.use_loss, or --drop algo.kl.init_coef measures G without a KL")  # fmt: skip
    if config.get("algo.kl.estimator") != "k3":
        raise Refused("algo.kl.estimator", config.get("algo.kl.estimator"), "groupscale's KL loss is k3; allowed: k3")
    return beta


@register_framework
class OpenRLHF(Framework):
    name = "openrlhf"
    title = "OpenRLHF"
    files = "a run script of python3 -m openrlhf.cli.train_ppo_ray (dotted or flat flags)"
    version = "OpenRLHF/OpenRLHF@3c3be623 (0.11) and PyPI 0.11.2"
    launch = re.compile(r"openrlhf\.cli\.train_ppo_ray")
    tied = ("rollout.n_samples_per_prompt", "rollout.batch_size")  # train.batch_size counts completions: it stays

    def read(self, path: Path, overrides: list[str]) -> Config:
        """A run script (or a file of flags); ``overrides``: ``key=value`` (dotted names, ``null`` to drop) or
        ``--flag value`` words, after the script's."""
        variables, items = split_variables(overrides)
        text = path.read_text()
        words = script_words(path, self.launch, variables) if is_script(path, text) else None
        script = flags(words.words if words else text.split())
        given = flags([w for item in items for w in (["--" + item.partition("=")[0], item.partition("=")[2]]
                                                      if "=" in item and not item.startswith("-") else [item])])  # fmt: skip
        given = {k: (None if v == "null" else v) for k, v in given.items()}
        return config_of([(nested(DEFAULTS), False), (nested(script), True), (nested(given), True)], path.name,
                         tuple(words.assumed if words else ()))  # fmt: skip

    def budget(self, config: Config) -> Budget:
        return openrlhf_budget(config)

    def settings(self, group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
        """OpenRLHF flags for G at B: prompts = B / G, train.batch_size = B / k completions. Raises Refused."""
        advantage = grpo.get("advantage", "loo")
        estimator = {v: k for k, v in ESTIMATORS.items()}.get(advantage)
        if estimator is None:
            raise Refused("advantage", advantage, f"OpenRLHF's group estimators are {', '.join(ESTIMATORS)}")
        k, sequence = grpo.get("steps_per_generation", 1), grpo.get("importance_sampling_level") == "sequence"
        if k != int(k) or samples_per_step % int(k):
            raise Refused("steps_per_generation", str(k), f"B = {samples_per_step} does not split into {k} optimizer steps")
        aggregation = grpo.get("loss_aggregation", "seq_mean_token_mean")
        if aggregation not in LOSS_AGG.values() or (sequence and aggregation != "seq_mean_token_mean"):
            raise Refused("loss_aggregation", aggregation, "OpenRLHF aggregates by token-mean, or seq-mean-token-mean (gspo's)")
        out: dict[str, Any] = {
            "rollout.n_samples_per_prompt": group_size,
            "rollout.batch_size": samples_per_step // group_size,
            "train.batch_size": samples_per_step // int(k),
            "train.max_epochs": grpo.get("inner_steps", 1),
            "algo.advantage.estimator": estimator,
            "actor.policy_loss_type": "gspo" if sequence else "ppo",
            "actor.eps_clip_low_high": [grpo.get("clip_eps", 0.2), grpo.get("clip_eps_high") or grpo.get("clip_eps", 0.2)],
            "rollout.temperature": grpo.get("temperature", 1.0),
            "rollout.max_new_tokens": grpo.get("max_new_tokens"),
            "algo.kl.init_coef": grpo.get("kl_beta", 0.0),
        }
        if aggregation == "seq_mean_token_mean" and not sequence:
            out["actor.loss_agg_mode"] = "seq-mean-token-mean"  # PyPI 0.11.2's flag
        if grpo.get("kl_beta", 0.0) > 0:
            out |= {"algo.kl.use_loss": True, "algo.kl.estimator": "k3"}
        return out

    def words(self, settings: dict[str, Any]) -> list[str]:
        """``--flag value`` lines (a list's values in a row; True: the flag alone)."""

        def value(v: Any) -> str:
            return " ".join(map(word, v)) if isinstance(v, list) else word(v)

        return [f"--{k}" if v is True else f"--{k} {value(v)}" for k, v in settings.items() if v is not None and v is not False]

    def edit(self, path: Path, text: str, changes: dict[str, Any]) -> str:
        """The script with each flag's value changed where it is set, under the spelling it uses (flat or dotted)."""
        spelled = {v: f"--{k}" for k, v in RENAMED.items() if re.search(rf"--{k}\b(?![.\w])", text)}
        words = dict(zip(changes, self.words(changes)))
        return edit_script(text, self.launch, {
            f"{spelled.get(key, '--' + key)} ": words[key].replace(f"--{key}", spelled.get(key, f"--{key}"), 1) for key in changes
        })  # fmt: skip
