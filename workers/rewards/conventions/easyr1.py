"""EasyR1's convention: ``compute_score(reward_inputs, **reward_function_kwargs)`` on a batch of
``{response, response_length, ground_truth}`` dicts, a list of ``{overall, <part>: ...}`` dicts back (``overall`` is
the reward, each other part's mean is logged); a module with ``REWARD_TYPE = "sequential"`` is called once per
completion with one dict and returns one.

response: the completion's text; response_length: its tokens; ground_truth: the ``answer_column`` (default ``answer``,
EasyR1's ``data.answer_key``); the entry's ``kwargs`` are ``worker.reward.reward_function_kwargs``.

Source: EasyR1@b44b311, ``AutoRewardManager`` (verl/workers/reward/function.py) and
examples/reward_function/math.py.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from workers.rewards.builtin import text_of
from workers.rewards.conventions import Convention, mean_of, register_convention, settled, takes
from workers.rewards.terms import column_values

ANSWER = "answer"


def fits(sig: inspect.Signature, fn: Callable[..., Any]) -> bool:
    return takes(sig, "reward_inputs", "reward_input") and not takes(sig, "completions")


def sequential(fn: Callable[..., Any]) -> bool:
    """EasyR1 reads the module's ``REWARD_TYPE`` (default ``batch``)."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    return getattr(module, "REWARD_TYPE", "batch") == "sequential"


def overall(scores: Any, log_metric: Callable[[str, float], None], name: str) -> list[Any]:
    """EasyR1's scores -> each ``overall``; the mean of every other part -> log_metric.

    Raises:
        ValueError: a score that is not a dict with ``overall``.
    """
    scores = list(scores)
    for s in scores:
        if not isinstance(s, dict) or "overall" not in s:
            got = sorted(s)[:10] if isinstance(s, dict) else type(s).__name__
            raise ValueError(f"reward function {name} must return EasyR1's dicts with 'overall'; got {got}")
    for part in dict.fromkeys(k for s in scores for k in s if k != "overall"):
        mean = mean_of([s[part] for s in scores if s.get(part) is not None])
        if mean is not None:
            log_metric(str(part), mean)
    return [s["overall"] for s in scores]


def wrap(fn: Callable[..., Any], entry: dict[str, Any], name: str) -> Callable[..., Any]:
    column, extra, one_by_one = entry.get("answer_column") or ANSWER, dict(entry.get("kwargs") or {}), sequential(fn)

    def reward(
        completions: list[Any], completion_ids: list[list[int]], log_metric: Callable[[str, float], None], **columns: Any
    ) -> Any:
        truths = column_values(columns, column, len(completions))
        inputs = [
            {"response": text_of(c), "response_length": len(ids), "ground_truth": t}
            for c, ids, t in zip(completions, completion_ids, truths)
        ]
        if one_by_one:
            return settled([fn(x, **extra) for x in inputs], lambda done: overall(done, log_metric, name))
        return settled([fn(inputs, **extra)], lambda done: overall(done[0], log_metric, name))

    reward.__name__ = getattr(fn, "__name__", "compute_score")
    return reward


EASYR1 = register_convention(
    Convention(
        "easyr1",
        "compute_score(reward_inputs, **kwargs) -> [{overall, ...}] ({response, response_length, ground_truth})",
        ANSWER,
        fits,
        wrap,
    )
)
