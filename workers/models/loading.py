"""Loading a policy from a preset or a local Hugging Face folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from workers.models.base import Policy
from workers.models.lm import LMPolicy
from workers.models.presets import PRESETS, preset_path
from workers.models.tabular import TabularPolicy, TabularSoftmax
from workers.tasks import Task


def load_lm(folder: Path) -> LMPolicy:
    """A causal LM folder, always local_files_only=True and trust_remote_code=False.

    A tokenizer without a pad token pads with EOS; padding is on the left so completions start
    at one column. Raises OSError when the folder holds no loadable model.
    """
    hf_logging.disable_progress_bar()  # no per-trial progress bars in worker logs
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    return LMPolicy(model, tokenizer)


def load_policy(model: dict[str, Any], task: Task, cache_dir: Path) -> Policy:
    """``{"preset": "tabular"}`` (bandit), ``{"preset": name}`` (built and cached on first use) or ``{"path": folder}``.

    Raises:
        ValueError: unknown preset, or a preset that does not fit the task.
    """
    preset = model.get("preset")
    if preset == "tabular":
        if not hasattr(task, "initial_logits"):
            raise ValueError(f"preset 'tabular' needs task 'bandit', not {task.name!r}")
        return TabularPolicy(TabularSoftmax(task.initial_logits))
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown model preset {preset!r}; valid: {', '.join([*PRESETS, 'tabular'])}")
    return load_lm(preset_path(preset, task, cache_dir) if preset else Path(model["path"]))
