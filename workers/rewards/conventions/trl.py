"""TRL's convention: ``reward_funcs`` called with keyword arguments (``prompts, completions, completion_ids``, every
dataset column, ``trainer_state``, ``log_metric``, ``log_extra``), one float or None per completion back; with the
entry's ``kwargs`` NAME is a factory, called once as ``NAME(**kwargs)``.

Source: TRL 1.16, ``GRPOTrainer._calculate_rewards`` (trl/trainer/grpo_trainer.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from workers.rewards.conventions import Convention, register_convention, takes, takes_any_keyword
from workers.rewards.terms import RewardError


def fits(sig: inspect.Signature, fn: Callable[..., Any]) -> bool:
    """TRL passes every column by keyword: a function takes ``completions`` or ``**kwargs``."""
    return takes(sig, "completions") or takes_any_keyword(sig)


def wrap(fn: Callable[..., Any], entry: dict[str, Any], name: str) -> Callable[..., Any]:
    if entry.get("answer_column"):
        raise RewardError(
            f"answer_column is not read by {name}, a TRL-convention function, which receives every column as a keyword argument"
        )
    if entry.get("kwargs") is None:
        return fn
    try:
        made = fn(**entry["kwargs"])
    except Exception as e:  # noqa: BLE001 - user code
        raise RewardError(f"reward factory {name}(**kwargs) raised {type(e).__name__}: {str(e)[:300]}") from e
    if not callable(made):
        raise RewardError(f"reward factory {name}(**kwargs) returned a {type(made).__name__}, not a reward function")
    return made


TRL = register_convention(Convention("trl", "NAME(completions, **kwargs) -> [float | None]", None, fits, wrap))
