"""The spec's ``model:`` section: a preset or a local model folder, with LoRA."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sweeps.spec.base import PRESET_NAMES, TEMPLATE_ARGUMENTS, JsonObject, StrictModel


class LoraSpec(StrictModel):
    """``model.lora``: train a LoRA adapter instead of every weight (peft's LoraConfig; both engines)."""

    r: int = Field(16, ge=1, le=4096, description="the adapter's rank")
    alpha: float = Field(32.0, gt=0, le=1e6, description="lora_alpha: the update is scaled by alpha / r")
    dropout: float = Field(0.05, ge=0, lt=1, description="lora_dropout")
    target_modules: list[Annotated[str, Field(min_length=1, max_length=256)]] | Literal["all-linear"] = Field(
        "all-linear", description="module names to adapt (q_proj, v_proj, ...), or all-linear"
    )


class ModelSpec(StrictModel):
    """Either a built-in preset (tiny, built from a transformers config) or a local HF folder."""

    preset: Literal["tiny-llama", "chat-tiny", "tabular"] | None = None
    path: str | None = Field(None, max_length=4096, description="local Hugging Face model folder")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="weights' dtype; auto: bfloat16 on CUDA, else float32"
    )
    chat_template: bool = Field(True, description="render conversational prompts with the tokenizer's chat template")
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2", "flex_attention"] | None = Field(
        None, description="passed to from_pretrained (default: transformers' choice)"
    )
    lora: LoraSpec | None = Field(None, description="train a LoRA adapter (r, alpha, dropout, target_modules)")
    chat_template_kwargs: JsonObject | None = Field(
        None,
        description="extra variables of the chat template wherever prompts are rendered (training, eval, probe), "
        "as TRL's chat_template_kwargs: e.g. {enable_thinking: false}",
    )

    @field_validator("chat_template_kwargs")
    @classmethod
    def _template_variables(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        taken = sorted(set(v or ()) & set(TEMPLATE_ARGUMENTS))
        if taken:
            raise ValueError(
                f"{', '.join(taken)}: set by groupscale when it renders prompts; allowed: the template's own "
                f"variables (not {', '.join(TEMPLATE_ARGUMENTS)})"
            )
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> ModelSpec:
        if (self.preset is None) == (self.path is None):
            raise ValueError(f"give exactly one of model.preset (one of: {', '.join(PRESET_NAMES)}) or model.path")
        return self

    @property
    def label(self) -> str:
        """The preset's name, or the folder's path (the server files recommendations under its model_key)."""
        return self.preset or str(self.path)


# TRL's GRPOConfig names accepted in ``grpo:`` (README "Coming from TRL / verl"): TRL name -> ours.
