"""The spec's shared parts: the names the workers implement, the limits, and the strict base model."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo

# Names the workers implement; tests/workers check that the registries agree with these.
TASK_NAMES = ("arithmetic", "bandit", "jsonl", "dataset")
REWARD_NAMES = ("exact_match", "numeric_match", "math_verify")
PRESET_NAMES = ("tiny-llama", "chat-tiny", "tabular")
DTYPE_NAMES = ("auto", "float32", "bfloat16")
# A user reward function: FILE.py:NAME (FILE must lie under GROUPSCALE_REWARD_ROOT on the server).
FUNCTION_PATTERN = r"^[^\x00]+\.py:[A-Za-z_][A-Za-z0-9_]*$"
ADVANTAGE_NAMES = ("loo", "mean", "mean_std", "oracle", "loo_std")
OPTIMIZER_NAMES = ("adamw", "sgd")
LOSS_AGGREGATION_NAMES = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")

# apply_chat_template's own arguments: chat_template_kwargs cannot set them (groupscale renders prompts one way).
TEMPLATE_ARGUMENTS = tuple(
    "conversation tools documents chat_template add_generation_prompt continue_final_message tokenize padding "
    "truncation max_length return_tensors return_dict return_assistant_tokens_mask tokenizer_kwargs".split()
)

# The engines a spec may name, by name: the one list of engine names. sweeps.engines.base.register_engine fills it,
# and sweeps.spec imports sweeps.engines last, so every engine is in it before a spec is read.
ENGINES: dict[str, Any] = {}


def get_engine(name: str) -> Any:
    """The engine called ``name`` (a sweeps.engines.base.Engine). Raises ValueError naming the valid engines."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; valid: {', '.join(ENGINES)}") from None


MAX_GROUP_SIZE = 4096
MAX_COMPLETION_TOKENS = 1 << 17  # reasoning recipes ask for 8192 to 32768 tokens and more
MAX_SAMPLES_PER_STEP = 1 << 20
MAX_JSON_DEPTH = 32  # a free-form section's nesting (a GRPOConfig or a template's variables need 3 or 4)


class StrictModel(BaseModel):
    # strict: no "20" -> 20 or true -> 1 coercion; no NaN or infinity in any float.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def storable_json(value: Any, info: ValidationInfo) -> Any:
    """``value`` unchanged if every store (SQLite, PostgreSQL) and every JSON answer gives it back exactly.

    For the free-form sections that the strict model cannot type (``trl:``, ``model.chat_template_kwargs``, a
    reward's ``kwargs``): objects with string keys, lists, strings that are valid Unicode, finite numbers, booleans
    and null, nested at most MAX_JSON_DEPTH deep.

    Raises:
        ValueError: naming the path inside the field (``trl.learning_rate``) and what is allowed there: NaN or
            infinity, a lone surrogate (``"\\ud800"``), a non-string key, a YAML date or other non-JSON value, or
            deeper nesting.
    """
    stack: list[tuple[Any, str, int]] = [(value, info.field_name or "value", 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels; allowed: at most {MAX_JSON_DEPTH}")
        if isinstance(node, dict):
            for key, item in node.items():
                if not isinstance(key, str):
                    raise ValueError(f"{where}: the key {key!r} is a {type(key).__name__}; allowed: string keys")
                _unicode(key, f"{where}: a key")
                stack.append((item, f"{where}.{key}", depth + 1))
        elif isinstance(node, list):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(node))
        elif isinstance(node, str):
            _unicode(node, where)
        elif isinstance(node, float) and not math.isfinite(node):
            raise ValueError(f"{where}: {node} cannot be stored; allowed: finite numbers")
        elif node is not None and not isinstance(node, bool | int | float):
            raise ValueError(
                f"{where}: a {type(node).__name__} ({str(node)[:40]}); allowed: JSON values "
                "(objects, lists, strings, finite numbers, true, false, null)"
            )
    return value


def _unicode(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{where}: not valid Unicode ({e.reason} at character {e.start}); allowed: UTF-8 text") from None


# A free-form JSON object in the spec: see storable_json.
JsonObject = Annotated[dict[str, Any], AfterValidator(storable_json)]
