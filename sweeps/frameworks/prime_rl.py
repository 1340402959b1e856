"""prime-rl (PrimeIntellect-ai/prime-rl): its ``rl.toml`` (``uv run rl @ rl.toml``) or the orchestrator's file of the
split form (``orch.toml``, with a ``train.toml`` beside it read as the trainer's), overrides as ``key=value`` or as
prime-rl's flags (``--orchestrator.group-size 16``), in the budget vocabulary, and back.

Keys and units (``packages/prime-rl-configs/src/prime_rl/configs/{orchestrator,trainer,rl}.py``,
``src/prime_rl/orchestrator/algo/grpo.py``, ``src/prime_rl/trainer/rl/{loss,train}.py``, PrimeIntellect-ai/prime-rl@559b447,
2026-08): ``orchestrator.group_size`` is G (default 1; a train source's own ``group_size`` overrides it);
``orchestrator.batch_size`` counts COMPLETIONS (one per trainable trace) per step, so it is B itself (128 when neither it
nor ``token_batch_size`` is set; G must divide it); the trainer takes one ``optimizer.step()`` per step over all of it
(k = 1, mu = 1) and divides the summed token losses by the step's token count (token_mean); GRPO's advantage is
r - group mean without std (groupscale's ``mean``), the ratio per token, no reference KL (kl_beta 0).

What groupscale does not train is refused unless dropped (``--drop KEY``), in this order: token batches, a G per source
that differs, G < 2, another algorithm or a length penalty, curricula, the trainer one step ahead of inference
(hard-coded, no key: named ``orchestrator.async`` here), the loss (DPPO's mask on the probability difference with
kl_tau (log ratio)^2, IPO's, a custom one: no ratio clip), ``adv_tau``, ``filter_zero_advantages`` (drops samples without
refill), an optimizer other than AdamW. Old names are read with a note: prime-rl refuses every one since d612e23.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import tomlkit
from omegaconf import OmegaConf

from sweeps.frameworks.base import Budget, Config, Framework, Refused, register_framework, whole
from sweeps.frameworks.files import config_of, load_mapping, nested, overrides_config

O, T = "orchestrator.", "trainer."
ASYNC = O + "async"  # no prime-rl key: the name under which its one step of asynchrony is refused and dropped
DEFAULTS = {  # prime-rl@559b447 packages/prime-rl-configs/src/prime_rl/configs/: the keys budget() reads
    O + "group_size": 1,  # orchestrator.py L517
    O + "max_off_policy_steps": 8,  # orchestrator.py L532
    O + "algo.type": "grpo",  # orchestrator.py L448
    O + "train.filter_zero_advantages": True,  # orchestrator.py L270
    O + "train.sampling.temperature": 1.0,  # orchestrator.py L47 (max_completion_tokens L50: None, until EOS)
    T + "loss.type": "default",  # trainer.py L604, DefaultLossConfig L497-506
    T + "loss.dppo_mask_low": 0.2,
    T + "loss.dppo_mask_high": 0.2,
    T + "loss.adv_tau": 1.0,
    T + "loss.kl_tau": 1e-3,
    T + "optim.type": "adamw",  # trainer.py L607
    T + "optim.lr": 1e-6,  # trainer.py L416
}
BATCH_SIZE = 128  # orchestrator.py L627: batch_size when neither it nor token_batch_size is set
RENAMED = {  # an old key -> (the name prime-rl requires now, the commit that renamed it); all aliases gone in d612e23
    O + "rollouts_per_example": (O + "group_size", "20f6449e"),
    O + "train.sampling.max_tokens": (O + "train.sampling.max_completion_tokens", "d2718f5"),
    O + "sampling.max_completion_tokens": (O + "train.sampling.max_completion_tokens", "d2718f5"),
    O + "sampling.max_tokens": (O + "train.sampling.max_completion_tokens", "d2718f5"),
    O + "sampling.temperature": (O + "train.sampling.temperature", "d2718f5"),
    O + "train.env": (O + "train.source", "d135ed4c"),
    O + "env": (O + "train.source", "d2718f5 and d135ed4c"),
}
SPLIT_ORCHESTRATOR = ("batch_size", "group_size", "rollouts_per_example", "token_batch_size", "train", "sampling", "environment")
SPLIT_TRAINER = ("optim", "loss", "scheduler")
TRAINER_FILES = ("train.toml", "trainer.toml")  # the trainer's file of the split form, beside the orchestrator's


def _nones(value: Any) -> Any:
    """The mapping with prime-rl's ``"None"`` (TOML has no null; its loader reads the string as None) as None."""
    if isinstance(value, dict):
        return {k: _nones(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nones(v) for v in value]
    return None if value == "None" else value


def _split(data: dict[str, Any]) -> str | None:
    """Which process's file of the split form ``data`` is (``orchestrator``, ``trainer``), None for an rl.toml."""
    if "orchestrator" in data or "trainer" in data:
        return None
    if any(key in data for key in SPLIT_ORCHESTRATOR):
        return "orchestrator"
    return "trainer" if any(key in data for key in SPLIT_TRAINER) else None


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    """``data`` with the dotted ``key`` set (a number indexes a list: ``orchestrator.train.source.0.group_size``)."""
    *parents, leaf = key.split(".")
    node: Any = data
    for part in parents:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node.setdefault(part, {}) if isinstance(node.get(part), (dict, list)) or part not in node else None
        if not isinstance(node, (dict, list)):
            raise ValueError(f"override {key}: {part!r} is not a table or an index of the file's list")
    if isinstance(node, list):
        if not (leaf.isdigit() and int(leaf) < len(node)):
            raise ValueError(f"override {key}: {leaf!r} is not an index of the file's list")
        node[int(leaf)] = value
    else:
        node[leaf] = value


def _words(items: list[str], split: str | None) -> list[tuple[str, Any]]:
    """Overrides as (dotted key, value): ``key=value`` or prime-rl's ``--a.b-c value``, ``--a.b-c=value``, ``--flag``
    (true), ``--no-flag`` (false); values read as YAML, ``None`` as None. In the orchestrator's file of the split form a
    key without ``orchestrator.`` or ``trainer.`` is the orchestrator's. Raises ValueError naming a word it cannot read."""
    dotted, i = [], 0
    while i < len(items):
        item, following = items[i], items[i + 1] if i + 1 < len(items) else None
        if "@" in (item, following):
            raise ValueError("prime-rl's '@ FILE' composition is not read: give the file that holds the merged settings")
        if not item.startswith("--"):
            dotted, i = [*dotted, item], i + 1
            continue
        flag, eq, value = item[2:].partition("=")
        if eq:
            i += 1
        elif following is not None and not following.startswith("--"):
            value, i = following, i + 2
        else:
            flag, value, i = (flag[3:], "false", i + 1) if flag.startswith("no-") else (flag, "true", i + 1)
        dotted.append(f"{flag.replace('-', '_')}={value}")
    values, keys = overrides_config(dotted)
    pairs = [(key, _nones(OmegaConf.to_object(v) if OmegaConf.is_config(v := OmegaConf.select(values, key)) else v))
             for key in keys]  # fmt: skip
    prefix = (split or "") + "." if split else ""
    return [(key if not prefix or key.split(".")[0] in ("orchestrator", "trainer") else prefix + key, v) for key, v in pairs]


def _note(config: Config, line: str) -> None:
    if line not in config.assumed:
        config.assumed.append(line)


def _dropped(config: Config, key: str) -> bool:
    """Whether the user's ``--drop KEY`` (or ``KEY=null``) set ``key`` to nothing."""
    return key in config.given and OmegaConf.select(config.values, key, default=None) is None


def _named(config: Config, new: str, *old: str) -> str:
    """The key the file sets a setting with: ``new``, else an old name (noted: prime-rl refuses it now), else ``new``."""
    for key in (new, *old):
        if key in config.given or any(g.startswith(key + ".") for g in config.given):
            if key != new:
                name, commit = RENAMED[key]
                _note(config, f"read {key} as {name}: prime-rl renamed it in {commit} and refuses the old name since d612e23")
            return key
    return new


def _sources(config: Config) -> tuple[str, list[dict[str, Any]]]:
    """The train sources (``[[orchestrator.train.source]]``, or an old file's env list) and their key."""
    key = _named(config, O + "train.source", O + "train.env", O + "env")
    value = config.get(key)
    return key, [s if isinstance(s, dict) else {} for s in value] if isinstance(value, list) else []
