"""Reward terms and their weighted sum, called the way TRL's GRPOTrainer calls ``reward_funcs``.

A term is a TRL-style function: called with keyword arguments ``prompts``, ``completions``,
``completion_ids``, every other dataset column (one list entry per completion), ``trainer_state``,
``log_metric`` and ``log_extra``; it returns one float, or None to abstain, per completion. An ``async
def`` term is awaited, all of a call's async terms together (``asyncio.gather`` on one event loop that
lives as long as the process, as TRL's ``async_loop``). The reward of a completion is the weighted sum
over the terms that did not abstain (TRL's nansum); one that every term abstained on counts 0.

Source: TRL 1.16, ``GRPOTrainer._calculate_rewards`` (trl/trainer/grpo_trainer.py).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workers.data import lookup
from workers.rewards.builtin import BUILTIN_REWARDS, UnreadableReference, text_of

log = logging.getLogger("groupscale.rewards")
# Keyword arguments TRL's trainer sets itself; a dataset column of the same name does not replace them.
TRL_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "log_metric", "log_extra")
_KEY_CHARS = re.compile(r"[^A-Za-z0-9_.\- ]")  # MLflow metric keys: alphanumerics, _ - . space (and /, kept as separator)


class RewardError(RuntimeError):
    """A reward function failed: it could not be loaded, raised, returned the wrong number of values or a
    non-finite one. ``index`` is the term's position in the spec's ``rewards`` (None: not one term's)."""

    def __init__(self, msg: str, index: int | None = None) -> None:
        super().__init__(msg)
        self.index = index

    def __reduce__(self) -> tuple:  # crosses the reward process's pipe with its index
        return (RewardError, (str(self), self.index))


@dataclass
class TrainerState:
    """What TRL's ``trainer_state`` (transformers.TrainerState) gives reward functions, by TRL's names.

    global_step: optimizer steps done (0 while the first batch is scored); max_steps: T;
    epoch, num_train_epochs: training prompts drawn / dataset rows, so far and over the trial (floats);
    train_batch_size: B completions per step; log_history: one dict of the trainer's metrics per step, with "step".
    """

    global_step: int = 0
    max_steps: int = 0
    epoch: float = 0.0
    num_train_epochs: float = 0.0
    logging_steps: int = 1
    train_batch_size: int = 0
    log_history: list[dict[str, float]] = field(default_factory=list)
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True


@dataclass(frozen=True)
class WeightedReward:
    """One term of the reward: its name for messages, its metric key, its weight, its function and how it is called
    (``convention``: a built-in's ``builtin``, a reward server's ``http``, else the function's trainer convention)."""

    name: str
    key: str
    weight: float
    fn: Callable[..., Any]
    convention: str = "builtin"


@dataclass(frozen=True)
class RewardBatch:
    """rewards: (S,) float32 weighted sums; per_function: term key -> (S,) float64 (NaN: abstained);
    abstained: completions on which every function abstained (they count 0); logged: log_metric name ->
    mean of the values logged in this call; extras: log_extra column -> S values."""

    rewards: np.ndarray
    per_function: dict[str, np.ndarray]
    abstained: int
    logged: dict[str, float] = field(default_factory=dict)
    extras: dict[str, list] = field(default_factory=dict)


def metric_key(text: str) -> str:
    """``text`` as a valid, path-like MLflow metric key part: characters MLflow refuses become ``_`` and a
    leading dot (``..``, ``.hidden``) is escaped the same way."""
    safe = _KEY_CHARS.sub("_", text).strip() or "_"
    return "_" + safe[1:] if safe.startswith(".") else safe


def term_names(specs: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """(name for messages, unique metric key) of each spec entry: ``FILE.py:NAME`` and ``<stem>.<NAME>`` for a
    function, the URL and ``http.<host>_<port>`` for a reward server, the built-in's name for a built-in (a key
    that repeats gets ``_2``, ``_3``...)."""
    out, seen = [], defaultdict(int)
    for spec in specs:
        if spec.get("url"):
            name = spec["url"]
            key = metric_key("http." + name.split("://", 1)[-1].split("/", 1)[0].replace(":", "_"))
        elif spec.get("function"):
            file, _, attr = spec["function"].rpartition(":")
            base = file.replace("\\", "/").rsplit("/", 1)[-1]
            name, key = f"{base}:{attr}", metric_key(f"{base.removesuffix('.py')}.{attr}")
        else:
            name = key = spec["name"]
        seen[key] += 1
        out.append((name, key if seen[key] == 1 else f"{key}_{seen[key]}"))
    return out


def builtin_function(name: str, answer_column: str) -> Callable[..., list[float]]:
    """A built-in as a TRL-style function of (completions, <answer_column>); a dotted answer_column reads a
    nested column (``reward_model.ground_truth``). A reference numeric_match cannot read (UnreadableReference)
    scores 0 and is counted: ``log_metric("<name>.unreadable_references", count)`` on a call that met one (the step's
    ``reward_log/`` metric) and a warning, the first time, that shows no data."""
    if name not in BUILTIN_REWARDS:
        raise ValueError(f"unknown reward {name!r}; valid: {', '.join(BUILTIN_REWARDS)}")
    score = BUILTIN_REWARDS[name]
    warned = False

    def reward(completions: list[Any], log_metric: Callable[[str, float], None] | None = None, **columns: Any) -> list[float]:
        nonlocal warned
        answers = column_values(columns, answer_column, len(completions))
        scores, unread = [], 0
        for c, a in zip(completions, answers):
            try:
                scores.append(score(text_of(c), str(a)))
            except UnreadableReference:  # one row's reference: a 0 for it, not a failed trial
                scores.append(0.0)
                unread += 1
        if unread and log_metric is not None:
            log_metric(f"{name}.unreadable_references", float(unread))
        if unread and not warned:
            warned = True
            log.warning("%s: %d references in column %r are not a number; they score 0", name, unread, answer_column)
        return scores

    reward.__name__ = name
    return reward


def column_values(columns: dict[str, list], path: str, n: int) -> list[Any]:
    """The n values at ``path`` (a column, or a dotted path into one) from TRL's per-completion column lists.

    Raises:
        KeyError: no such column or nested key.
    """
    if path in columns:
        return list(columns[path])
    head = path.split(".", 1)[0]
    if head not in columns:
        raise KeyError(f"no column {head!r} (columns: {sorted(k for k in columns if k not in TRL_ARGUMENTS)})")
    return [lookup({head: columns[head][i]}, path) for i in range(n)]


def trl_kwargs(
    prompts: Sequence[Any],
    completions: Sequence[str],
    completion_ids: Sequence[Sequence[int]],
    rows: Sequence[dict[str, Any]],
    conversational: bool,
    state: TrainerState | None = None,
) -> dict[str, Any]:
    """TRL's reward keyword arguments for S completions: their prompts, the completions (as one assistant
    message each for conversational prompts), their token ids, ``trainer_state`` and every column of each
    completion's row (``rows``: S dicts without the prompt column)."""
    kwargs: dict[str, Any] = {
        "prompts": list(prompts),
        "completions": [[{"role": "assistant", "content": c}] for c in completions] if conversational else list(completions),
        "completion_ids": [list(ids) for ids in completion_ids],
        "trainer_state": state if state is not None else TrainerState(),
    }
    for key in rows[0] if rows else ():
        kwargs.setdefault(key, [row.get(key) for row in rows])
    return kwargs


_LOOP: asyncio.AbstractEventLoop | None = None


def _event_loop() -> asyncio.AbstractEventLoop:
    """One event loop for every async reward call of this process (TRL keeps one, so loop-bound state such
    as an aiohttp session or an async cache lives across calls)."""
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP


def compute_rewards(terms: Sequence[WeightedReward], kwargs: dict[str, Any], n: int) -> RewardBatch:
    """Call every term with TRL's keyword arguments (plus ``log_metric`` and ``log_extra``) and sum them, weighted.

    Args:
        terms: the reward terms (workers.rewards.loading.build_terms).
        kwargs: trl_kwargs: prompts, completions, completion_ids, trainer_state and the columns, each a list of n.
        n: completions in the batch.
    Raises:
        RewardError: a function raised, returned a number of values other than n, or a non-finite or
            non-numeric value; the message names the function.
    """
    logged: dict[str, list[float]] = defaultdict(list)
    extras: dict[str, list] = defaultdict(list)

    def log_metric(name: str, value: float) -> None:  # TRL: averaged over the step
        logged[str(name)].append(float(value))

    def log_extra(column: str, values: list) -> None:  # TRL: a column of the completions table
        extras[str(column)].extend(values)

    call = {**kwargs, "log_metric": log_metric, "log_extra": log_extra}
    outputs: dict[int, Any] = {}
    waiting: list[tuple[int, Any]] = []
    for i, term in enumerate(terms):
        try:
            out = term.fn(**call)
        except Exception as e:  # noqa: BLE001 - user code: any failure is the function's
            raise _raised(term, i, e) from e
        if inspect.isawaitable(out):
            waiting.append((i, out))
        else:
            outputs[i] = out
    if waiting:
        done = _event_loop().run_until_complete(_gather([aw for _, aw in waiting]))
        for (i, _), out in zip(waiting, done):
            if isinstance(out, BaseException):
                raise _raised(terms[i], i, out) from out
            outputs[i] = out
    total = np.zeros(n, dtype=np.float64)
    seen = np.zeros(n, dtype=bool)
    per_function = {}
    for i, term in enumerate(terms):
        values = _values(term, i, outputs[i], n)
        per_function[term.key] = values
        given = ~np.isnan(values)
        total[given] += term.weight * values[given]
        seen |= given
    return RewardBatch(
        total.astype(np.float32),
        per_function,
        int((~seen).sum()),
        {k: float(np.mean(v)) for k, v in logged.items() if v and all(math.isfinite(x) for x in v)},
        {k: v for k, v in extras.items() if len(v) == n},
    )


async def _gather(awaitables: list[Any]) -> list[Any]:
    return await asyncio.gather(*awaitables, return_exceptions=True)


def _raised(term: WeightedReward, index: int, e: BaseException) -> RewardError:
    if isinstance(e, RewardError):  # the term said what failed (a reward server, a convention's contract)
        return RewardError(str(e), index)
    return RewardError(f"reward function {term.name} raised {type(e).__name__}: {str(e)[:300]}", index)


def _values(term: WeightedReward, index: int, out: Any, n: int) -> np.ndarray:
    """A term's output as (n,) float64 with NaN for None. Raises RewardError naming the term."""
    try:
        out = list(out)
    except TypeError:
        raise RewardError(
            f"reward function {term.name} returned a {type(out).__name__}, not a list of {n} floats (one per completion)", index
        ) from None
    if len(out) != n:
        raise RewardError(f"reward function {term.name} returned {len(out)} values for {n} completions", index)
    try:
        values = np.array([np.nan if v is None else float(v) for v in out], dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise RewardError(f"reward function {term.name} returned a value that is not a number or None ({e})", index) from e
    if np.isinf(values).any() or np.isnan([v for v in out if v is not None]).any():
        raise RewardError(f"reward function {term.name} returned a non-finite value (NaN or infinity)", index)
    return values
