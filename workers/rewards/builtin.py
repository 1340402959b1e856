"""The built-in rewards: exact_match, numeric_match and math_verify, as scores of one completion's text.

Spec ``{name: ..., answer_column: ...}``: ``exact_match`` (stripped text equals the answer),
``numeric_match`` (the final answer: after the last ``####``, else in the last ``\\boxed{}``, else
the last number) and ``math_verify`` (the ``math-verify`` package, an optional extra, with its default
signal-based timeouts: it runs in the reward process's main thread, workers.rewards.process).
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Callable
from typing import Any

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

    Uses math-verify's default timeouts (``signal.alarm``), which work only in a process's main thread.

    Raises:
        ImportError: the ``math-verify`` package is not installed (``pip install groupscale[math]``).
        ValueError: called off the main thread (math-verify's own error).
    """
    from math_verify import parse, verify

    gold, pred = parse(str(answer)), parse(completion)
    return 1.0 if gold and pred and verify(gold, pred) else 0.0


BUILTIN_REWARDS: dict[str, Callable[[str, str], float]] = {
    "exact_match": exact_match,
    "numeric_match": numeric_match,
    "math_verify": math_verify,
}
NEEDS_MAIN_THREAD = frozenset({"math_verify"})  # built-ins that run in the reward process (signal-based timeouts)


def math_verify_available() -> bool:
    return importlib.util.find_spec("math_verify") is not None
