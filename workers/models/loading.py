"""Loading a policy (model + tokenizer) from a preset or a local Hugging Face folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from workers.models.presets import preset_path
from workers.tasks import Task


def load_policy(model: dict[str, Any], task: Task, cache_dir: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``{"preset": name}`` (built and cached on first use) or ``{"path": folder}``.

    Always local_files_only=True and trust_remote_code=False. A tokenizer without a pad token
    pads with EOS; padding is on the left so completions start at one column.

    Raises:
        ValueError: unknown preset; OSError: the folder holds no loadable model.
    """
    folder = preset_path(model["preset"], task, cache_dir) if model.get("preset") else Path(model["path"])
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    policy = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    return policy, tokenizer
