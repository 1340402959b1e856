"""The spec's shared parts: the names the workers implement, the limits, and the strict base model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# Names the workers implement; tests/workers check that the registries agree with these.
TASK_NAMES = ("arithmetic", "bandit", "jsonl", "dataset")
REWARD_NAMES = ("exact_match", "numeric_match", "math_verify")
PRESET_NAMES = ("tiny-llama", "chat-tiny", "tabular")
DTYPE_NAMES = ("auto", "float32", "bfloat16")
# A user reward function: FILE.py:NAME (FILE must lie under GROUPSCALE_REWARD_ROOT on the server).
FUNCTION_PATTERN = r"^[^\x00]+\.py:[A-Za-z_][A-Za-z0-9_]*$"
ADVANTAGE_NAMES = ("loo", "mean", "mean_std", "oracle")
OPTIMIZER_NAMES = ("adamw", "sgd")
LOSS_AGGREGATION_NAMES = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")

# apply_chat_template's own arguments: chat_template_kwargs cannot set them (groupscale renders prompts one way).
TEMPLATE_ARGUMENTS = (
    "conversation",
    "tools",
    "documents",
    "chat_template",
    "add_generation_prompt",
    "continue_final_message",
    "tokenize",
    "padding",
    "truncation",
    "max_length",
    "return_tensors",
    "return_dict",
    "return_assistant_tokens_mask",
    "tokenizer_kwargs",
)

MAX_GROUP_SIZE = 4096
MAX_COMPLETION_TOKENS = 1 << 17  # reasoning recipes ask for 8192 to 32768 tokens and more
MAX_SAMPLES_PER_STEP = 1 << 20


class StrictModel(BaseModel):
    # strict: no "20" -> 20 or true -> 1 coercion; no NaN or infinity in any float.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
