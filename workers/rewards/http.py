"""Rewards from a reward server over HTTP: OpenRLHF's remote reward-model request, or a plain JSON one.

A spec entry ``{url, request, timeout_s, retries, batch_size}`` is a TRL-style term (workers.rewards.terms) that POSTs
the batch's completions to ``url`` in requests of at most ``batch_size`` and reads one score per completion back:

- ``request: openrlhf`` (OpenRLHF's ``--remote_rm_url``, openrlhf/cli/serve_rm.py): ``{"query": [prompt text +
  completion], "prompts": [prompt text], "labels": [answer_column, default label]}``; the reply ``{"rewards": [...]}``
  (or ``scores``; ``extra_logs`` means are logged);
- ``request: json``: ``{"prompts": [...], "completions": [...], "completion_ids": [...], <every column>: [...]}``
  (TRL's reward arguments as JSON); the reply a list of numbers or ``{"rewards": [...]}``.

A failed request (no connection, a timeout, a 5xx status, a reply that is not JSON, of another length or with a
value that is not a finite number) is tried again ``retries`` times, ``BACKOFF_S`` x 2^attempt apart, then the term
raises and the trial fails naming the URL and the last cause: nothing trains on a default reward. A 4xx status fails
at once (the request itself is wrong).

Source: OpenRLHF@3c3be62, ``SingleTurnAgentExecutor._fetch_rewards_via_http`` (openrlhf/utils/agent.py).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

from sweeps.spec.task import server_defaults
from workers.rewards.conventions.openrlhf import LABEL, request, rewards_of
from workers.rewards.terms import RewardError, column_values

BACKOFF_S = 0.5


class ServerError(RuntimeError):
    """One request failed; ``final``: trying again cannot help (a 4xx status)."""

    def __init__(self, msg: str, final: bool = False) -> None:
        super().__init__(msg)
        self.final = final


def payloads(entry: dict[str, Any], completions: list[Any], columns: dict[str, Any]) -> list[dict[str, Any]]:
    """The request bodies of a batch, ``batch_size`` completions each (all in one without it)."""
    n = len(completions)
    prompts = columns.get("prompts") or [""] * n
    if entry["request"] == "openrlhf":
        body = request(prompts, completions, column_values(columns, entry.get("answer_column") or LABEL, n))
    else:
        body = {"prompts": prompts, "completions": completions}
        body |= {k: v for k, v in columns.items() if k not in ("trainer_state", "log_metric", "log_extra", "prompts")}
    size = entry["batch_size"] or n
    return [{k: v[i : i + size] for k, v in body.items()} for i in range(0, n, size)]


def post(client: Any, url: str, body: dict[str, Any], n: int, log_metric: Callable[[str, float], None]) -> list[float]:
    """One request; its n scores. Raises ServerError (what went wrong, final for a 4xx)."""
    import httpx

    try:
        response = client.post(url, content=json.dumps(body, default=str), headers={"content-type": "application/json"})
    except httpx.TimeoutException:
        raise ServerError(f"no answer within {client.timeout.read:g} s") from None
    except httpx.HTTPError as e:
        raise ServerError(f"{type(e).__name__}: {e}") from None
    if response.status_code >= 400:
        raise ServerError(f"HTTP {response.status_code}: {response.text[:200]}", final=response.status_code < 500)
    try:
        values = rewards_of(response.json(), log_metric, "the server")
        scores = [float(v) for v in values]
    except (ValueError, TypeError) as e:
        raise ServerError(f"the reply is not one number per completion ({str(e)[:200]})") from None
    if len(scores) != n:
        raise ServerError(f"the reply has {len(scores)} scores for {n} completions")
    if not all(math.isfinite(s) for s in scores):
        raise ServerError("the reply has a value that is not a finite number (NaN or infinity)")
    return scores


def http_reward(entry: dict[str, Any]) -> Callable[..., list[float]]:
    """The entry's reward server as a TRL-style term (see the module docstring). Raises RewardError from the term."""
    import httpx

    entry = {**server_defaults(), **{k: v for k, v in entry.items() if v is not None}}
    url, retries = entry["url"], int(entry["retries"])
    client = httpx.Client(timeout=float(entry["timeout_s"]))

    def reward(completions: list[Any], log_metric: Callable[[str, float], None], **columns: Any) -> list[float]:
        scores: list[float] = []
        for body in payloads(entry, completions, columns):
            n = len(next(iter(body.values())))
            for attempt in range(retries + 1):
                try:
                    scores += post(client, url, body, n, log_metric)
                    break
                except ServerError as e:
                    if e.final or attempt == retries:
                        tries = f"{attempt + 1} request{'s' if attempt else ''}"
                        raise RewardError(f"the reward server {url} failed after {tries}: {e}") from None
                    time.sleep(BACKOFF_S * 2**attempt)
        return scores

    reward.__name__ = url
    return reward
