"""Reward functions: the built-ins, users' TRL-style functions, and their weighted sum.

A reward function follows TRL's convention (``GRPOTrainer(reward_funcs=...)``): it is called with
keyword arguments ``prompts``, ``completions``, ``completion_ids``, every other dataset column
(one list entry per completion) and ``trainer_state``; it returns one float, or None to abstain,
per completion. Conversational tasks pass each completion as ``[{"role": "assistant", "content":
text}]``, as TRL does. The reward of a completion is the weighted sum over the functions that did
not abstain (TRL's nansum); one that every function abstained on counts 0 and is counted.

Built-ins (spec ``{name: ..., answer_column: ...}``): ``exact_match`` (stripped text equals the
answer), ``numeric_match`` (the final answer: after the last ``####``, else in the last
``\\boxed{}``, else the last number) and ``math_verify`` (the ``math-verify`` package, an optional
extra). User functions (spec ``{function: FILE.py:NAME}``) are loaded from FILE, which the
controller has checked lies under GROUPSCALE_REWARD_ROOT (service.preflight).
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_HASHES = "####"


def text_of(completion: Any) -> str:
    """The completion's text: a string as it is, a conversational completion's content joined."""
    if isinstance(completion, str):
        return completion
    return "".join(str(m.get("content") or "") for m in completion)


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces balanced), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth = start + len("\\boxed{"), 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


def final_answer(text: str) -> str:
    """The final answer of a worked solution: after the last ``####`` (GSM8K), else the last
    ``\\boxed{}`` (MATH), else the last number, else the whole text (stripped)."""
    if _HASHES in text:
        return text.rsplit(_HASHES, 1)[1].strip()
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else text.strip()


def _as_number(text: str) -> float | None:
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def exact_match(completion: str, answer: str) -> float:
    """1 when the completion, stripped, equals the answer, stripped."""
    return 1.0 if completion.strip() == str(answer).strip() else 0.0


def numeric_match(completion: str, answer: str) -> float:
    """1 when the completion's final answer (``final_answer``) is the number of ``answer``
    (relative tolerance 1e-6; thousands separators ignored), else 0."""
    got, want = _as_number(final_answer(completion)), _as_number(final_answer(str(answer)))
    if got is None or want is None:
        return 0.0
    return 1.0 if math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9) else 0.0


def math_verify(completion: str, answer: str) -> float:
    """1 when ``math_verify.verify`` accepts the completion's parsed answer against the parsed answer.

    Raises:
        ImportError: the ``math-verify`` package is not installed (``pip install groupscale[math]``).
    """
    from math_verify import parse, verify

    gold, pred = parse(str(answer)), parse(completion)
    return 1.0 if gold and pred and verify(gold, pred) else 0.0


BUILTIN_REWARDS: dict[str, Callable[[str, str], float]] = {
    "exact_match": exact_match,
    "numeric_match": numeric_match,
    "math_verify": math_verify,
}


def math_verify_available() -> bool:
    return importlib.util.find_spec("math_verify") is not None


class RewardError(RuntimeError):
    """A reward function failed: raised, returned the wrong number of values or a non-finite one."""


@dataclass(frozen=True)
class TrainerState:
    """What TRL's ``trainer_state`` gives reward functions for shaping by progress."""

    global_step: int = 0
    max_steps: int = 0


def load_user_function(ref: str) -> Callable[..., Sequence[float | None]]:
    """``FILE.py:NAME`` -> the callable NAME defined in FILE (imported once per process).

    Raises:
        ValueError: not of the form FILE.py:NAME, or NAME is not a callable of FILE.
        OSError, SyntaxError, ...: FILE cannot be read or run (the caller names the function).
    """
    file, sep, name = ref.rpartition(":")
    if not sep or not file.endswith(".py") or not name.isidentifier():
        raise ValueError(f"reward function {ref!r} is not of the form FILE.py:NAME")
    path = Path(file).resolve()
    module_name = f"groupscale_user_rewards_{abs(hash(str(path)))}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"{file} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[module_name] = module
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{file} defines no function {name!r}")
    return fn


def builtin_function(name: str, answer_column: str) -> Callable[..., list[float]]:
    """A built-in as a TRL-style function of (completions, <answer_column>)."""
    if name not in BUILTIN_REWARDS:
        raise ValueError(f"unknown reward {name!r}; valid: {', '.join(BUILTIN_REWARDS)}")
    score = BUILTIN_REWARDS[name]

    def reward(completions: list[Any], **columns: Any) -> list[float]:
        return [score(text_of(c), str(a)) for c, a in zip(completions, columns[answer_column])]

    reward.__name__ = name
    return reward


@dataclass(frozen=True)
class WeightedReward:
    """One term of the reward: a label for messages and metrics, its weight and its function."""

    label: str
    weight: float
    fn: Callable[..., Sequence[float | None]]


@dataclass(frozen=True)
class RewardBatch:
    """rewards: (S,) float32 weighted sums; per_function: label -> (S,) float64 (NaN: abstained);
    abstained: completions on which every function abstained (they count 0)."""

    rewards: np.ndarray
    per_function: dict[str, np.ndarray]
    abstained: int


def build_rewards(specs: Sequence[dict[str, Any]]) -> list[WeightedReward]:
    """Spec entries ``{function: FILE.py:NAME, weight}`` or ``{name, answer_column, weight}`` -> terms.

    Raises:
        RewardError: a user function cannot be loaded (the message names it).
        ValueError: an unknown built-in name.
    """
    terms = []
    for spec in specs:
        weight = float(spec.get("weight", 1.0))
        if spec.get("function"):
            ref = spec["function"]
            try:
                fn = load_user_function(ref)
            except Exception as e:  # noqa: BLE001 - user code: any failure is reported with its name
                raise RewardError(f"reward function {Path(ref).name} could not be loaded: {type(e).__name__}: {e}") from e
            terms.append(WeightedReward(Path(ref).name, weight, fn))
        else:
            terms.append(WeightedReward(spec["name"], weight, builtin_function(spec["name"], spec["answer_column"])))
    return terms


def compute_rewards(terms: Sequence[WeightedReward], kwargs: dict[str, Any], n: int) -> RewardBatch:
    """Call every term with TRL's keyword arguments and sum them, weighted.

    Args:
        terms: the reward terms (build_rewards).
        kwargs: prompts, completions, completion_ids, trainer_state and the dataset columns, each a list of n.
        n: completions in the batch.
    Raises:
        RewardError: a function raised, returned a number of values other than n, or a non-finite or
            non-numeric value; the message names the function.
    """
    total = np.zeros(n, dtype=np.float64)
    seen = np.zeros(n, dtype=bool)
    per_function = {}
    for term in terms:
        try:
            out = list(term.fn(**kwargs))
        except Exception as e:  # noqa: BLE001 - user code: any failure is the function's
            raise RewardError(f"reward function {term.label} raised {type(e).__name__}: {str(e)[:300]}") from e
        if len(out) != n:
            raise RewardError(f"reward function {term.label} returned {len(out)} values for {n} completions")
        try:
            values = np.array([np.nan if v is None else float(v) for v in out], dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise RewardError(f"reward function {term.label} returned a value that is not a number or None ({e})") from e
        if np.isinf(values).any() or np.isnan([v for v in out if v is not None]).any():
            raise RewardError(f"reward function {term.label} returned a non-finite value (NaN or infinity)")
        per_function[term.label] = values
        given = ~np.isnan(values)
        total[given] += term.weight * values[given]
        seen |= given
    return RewardBatch(total.astype(np.float32), per_function, int((~seen).sum()))
