"""LoRA adapters (``model.lora``): the policy's module wrapped with peft, its trainable state, its parameter counts.

groupscale's trainer trains the adapter alone (``get_peft_model``: the base weights are frozen) and checkpoints
the adapter; the TRL engine hands ``lora_config`` to GRPOTrainer as ``peft_config``. ``probe.parameters: lora``
takes score vectors over the adapter's parameters (workers.scores).

Source: Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", arXiv 2106.09685 (2021); peft's LoraConfig.
"""

from __future__ import annotations

from typing import Any

import torch

LORA_MARK = "lora_"  # peft names every adapter parameter lora_A / lora_B / lora_embedding_*


def lora_config(lora: dict[str, Any]) -> Any:
    """peft's LoraConfig from the spec's ``model.lora`` ({r, alpha, dropout, target_modules}).

    Raises:
        ImportError: peft is not installed (``pip install 'groupscale[worker]'``).
    """
    from peft import LoraConfig

    return LoraConfig(
        r=lora["r"],
        lora_alpha=lora["alpha"],
        lora_dropout=lora["dropout"],
        target_modules=lora["target_modules"],
        task_type="CAUSAL_LM",
    )


def add_lora(module: torch.nn.Module, lora: dict[str, Any]) -> torch.nn.Module:
    """``module`` with a fresh LoRA adapter (initialised from torch's global RNG: seed it first); only the adapter
    is trainable."""
    from peft import get_peft_model

    return get_peft_model(module, lora_config(lora))


def is_lora(module: torch.nn.Module) -> bool:
    return hasattr(module, "peft_config")


def transformer_body(module: torch.nn.Module) -> torch.nn.Module:
    """The decoder stack (``LlamaModel``, ``Qwen2Model``...) of a causal LM, through a peft wrapper when there is one
    (a PeftModel; TRL's trainer injects its adapter into the model itself, which then has no wrapper)."""
    inner = module.get_base_model() if hasattr(module, "get_base_model") else module
    return inner.base_model


def trainable_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What a checkpoint must hold: the adapter's tensors for a LoRA module, else the whole state dict."""
    state = module.state_dict()
    return {k: v for k, v in state.items() if LORA_MARK in k} if is_lora(module) else state


def load_trainable_state(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """The inverse of trainable_state. Raises RuntimeError on missing or unexpected keys (of the adapter)."""
    if not is_lora(module):
        module.load_state_dict(state)
        return
    result = module.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if LORA_MARK in k]
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"the checkpoint's adapter does not fit: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}"
        )


def parameter_counts(module: torch.nn.Module) -> dict[str, float]:
    """``parameters_trainable`` and ``parameters_total`` (counts), for the trial's run."""
    params = list(module.parameters())
    return {
        "parameters_trainable": float(sum(p.numel() for p in params if p.requires_grad)),
        "parameters_total": float(sum(p.numel() for p in params)),
    }
