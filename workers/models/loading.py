"""Loading a policy from a preset or a local Hugging Face folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from workers.models.base import Policy
from workers.models.lm import LMPolicy
from workers.models.presets import LM_PRESETS, preset_path
from workers.models.tabular import TabularPolicy, TabularSoftmax
from workers.progress import Report, say
from workers.tasks import Task
from workers.tasks.bandit import BanditTask

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    """``model.dtype``: auto is bfloat16 on CUDA and float32 elsewhere (bf16 matmuls are slow on CPU).

    Raises:
        ValueError: an unknown name (lists the valid ones).
    """
    if dtype == "auto":
        return torch.bfloat16 if device == "cuda" else torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"unknown model dtype {dtype!r}; valid: auto, {', '.join(DTYPES)}")
    return DTYPES[dtype]


def load_lm(
    folder: Path,
    dtype: torch.dtype = torch.float32,
    chat_template: bool = True,
    attn_implementation: str | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> LMPolicy:
    """A causal LM folder, always local_files_only=True and trust_remote_code=False.

    A tokenizer without a pad token pads with EOS; padding is on the left so completions start
    at one column. Raises OSError when the folder holds no loadable model.
    """
    hf_logging.disable_progress_bar()  # no per-trial progress bars in worker logs
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    # use_kernels=False: transformers' hub kernels are fetched at run time (nothing may download here), and a model
    # with them re-kernelizes at every train() / eval() switch (1.3 ms each on CPU, twice a step)
    model = AutoModelForCausalLM.from_pretrained(
        folder, local_files_only=True, trust_remote_code=False, dtype=dtype, use_kernels=False, **extra
    )
    return LMPolicy(model, tokenizer, chat_template=chat_template, chat_template_kwargs=dict(chat_template_kwargs or {}))


def prepare_model(model: dict[str, Any], task: Task, cache_dir: Path, report: Report | None) -> None:
    """Build a built-in preset that is not cached yet (load_policy would build it without a word), telling ``report``
    at every warm-start step (stage ``model``); nothing for a model folder, the tabular preset or a cached preset.

    Raises:
        ValueError: a preset that does not fit the task.
    """
    preset = model.get("preset")
    if report is None or preset not in LM_PRESETS:
        return

    label = f"building the preset {preset}, a supervised warm start: once, then cached in {cache_dir}"

    def progress(step: int, most: int, checked: str) -> None:
        say(report, "model", label, step, most, "warm-start steps (at most)", checked)

    preset_path(preset, task, cache_dir, progress=progress)


def load_policy(model: dict[str, Any], task: Task, cache_dir: Path, device: str = "cpu") -> Policy:
    """``{"preset": "tabular"}`` (bandit), ``{"preset": name}`` (built and cached on first use) or ``{"path": folder}``.

    Raises:
        ValueError: unknown preset, or a preset that does not fit the task.
    """
    preset = model.get("preset")
    if preset == "tabular":
        if not isinstance(task, BanditTask):
            raise ValueError(f"preset 'tabular' needs task 'bandit', not {task.name!r}")
        return TabularPolicy(TabularSoftmax(task.initial_logits))
    if preset is not None and preset not in LM_PRESETS:
        raise ValueError(f"unknown model preset {preset!r}; valid: {', '.join([*LM_PRESETS, 'tabular'])}")
    folder = preset_path(preset, task, cache_dir) if preset else Path(model["path"])
    return load_lm(
        folder,
        resolve_dtype(model.get("dtype", "auto"), device),
        model.get("chat_template", True),
        model.get("attn_implementation"),
        model.get("chat_template_kwargs"),
    )
