"""OpenRLHF's convention: ``reward_func(queries, prompts, labels, **kwargs)`` on a batch, a dict back with ``rewards``
(what advantages are computed from), ``scores`` (OpenRLHF's dynamic filtering) and ``extra_logs``, or a tensor.

queries: each prompt's text followed by its completion's (OpenRLHF decodes the prompt and response tokens together;
here a chat prompt's text is its messages' contents joined by newlines, not the chat template); prompts: the prompts'
texts; labels: the ``answer_column`` (default ``label``, OpenRLHF's ``--label_key``). A reward served over HTTP
(``--remote_rm_url``) is workers.rewards.http's ``openrlhf`` request instead.

Source: OpenRLHF@3c3be62, ``SingleTurnAgentExecutor`` (openrlhf/utils/agent.py) and examples/python/reward_func.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from workers.rewards.builtin import text_of
from workers.rewards.conventions import Convention, mean_of, numbers, prompt_text, register_convention, settled, takes
from workers.rewards.terms import column_values

LABEL = "label"


def fits(sig: inspect.Signature, fn: Callable[..., Any]) -> bool:
    return takes(sig, "queries") and not takes(sig, "completions")


def rewards_of(reply: Any, log_metric: Callable[[str, float], None], source: str) -> list[Any]:
    """OpenRLHF's reply (``{rewards | scores, extra_logs?}`` or a sequence) -> the rewards; each ``extra_logs`` value's
    mean -> log_metric.

    Raises:
        ValueError: a dict with neither ``rewards`` nor ``scores`` (``source`` names the function or the URL).
    """
    if not isinstance(reply, dict):
        return numbers(reply)
    values = reply.get("rewards", reply.get("scores"))
    if values is None:
        raise ValueError(f"{source} returned a dict without 'rewards' or 'scores' (keys: {sorted(reply)[:10]})")
    for key, value in (reply.get("extra_logs") or {}).items():
        mean = mean_of(value)
        if mean is not None:
            log_metric(str(key), mean)
    return numbers(values)


def request(prompts: list[Any], completions: list[Any], labels: list[Any]) -> dict[str, list[Any]]:
    """OpenRLHF's arguments of a batch, as its remote reward request names them: ``query`` (each prompt's text followed
    by its completion's), ``prompts`` (the prompts' texts) and ``labels``."""
    texts = [prompt_text(p) for p in prompts]
    return {"query": [t + text_of(c) for t, c in zip(texts, completions)], "prompts": texts, "labels": labels}


def wrap(fn: Callable[..., Any], entry: dict[str, Any], name: str) -> Callable[..., Any]:
    column, extra = entry.get("answer_column") or LABEL, dict(entry.get("kwargs") or {})

    def reward(completions: list[Any], prompts: list[Any], log_metric: Callable[[str, float], None], **columns: Any) -> Any:
        batch = request(prompts, completions, column_values(columns, column, len(completions)))
        reply = fn(batch["query"], batch["prompts"], batch["labels"], **extra)
        return settled([reply], lambda done: rewards_of(done[0], log_metric, f"reward function {name}"))

    reward.__name__ = getattr(fn, "__name__", "reward_func")
    return reward


OPENRLHF = register_convention(
    Convention("openrlhf", "reward_func(queries, prompts, labels, **kwargs) -> {rewards, scores, extra_logs}", LABEL, fits, wrap)
)
