"""The built-in rewards: exact_match, numeric_match and math_verify, as scores of one completion's text.

Spec ``{name: ..., answer_column: ...}``: ``exact_match`` (stripped text equals the answer),
``numeric_match`` (the final answer, after the last ``####``, else in the last ``\\boxed{}``, else the last
number, read whole as one number or fraction; a reference it cannot read so raises UnreadableReference, which a
dataset task's term scores 0 and counts, workers.rewards.terms)
and ``math_verify`` (the ``math-verify`` package, an optional extra, with its default signal-based timeouts:
it runs in the reward process's main thread, workers.rewards.process). A reference stored as datasets store it
(accepted_answers: a JSON list of accepted answers, a ``{"ground_truth": ...}`` object) scores 1 when any answer it
lists does.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import re
from collections.abc import Callable
from typing import Any

_HASHES = "####"
_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")  # \frac{1}{9} -> 1/9
_LAYOUT = re.compile(r"\\(?:text|mathrm|mbox|textbf)\s*\{[^{}]*\}|\\[,;:! ]|\\%|\\\$|\\left|\\right|[$%{}]")
_VALUE = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*/\s*[-+]?\d+(?:\.\d+)?)?|[-+]?\.\d+")
_STATED = re.compile(rf"[-+]?{_FRACTION.pattern}|{_VALUE.pattern}")  # a number or a fraction, as written


def text_of(completion: Any) -> str:
    """The completion's text: a string as it is, a conversational completion's content joined."""
    return completion if isinstance(completion, str) else "".join(str(m.get("content") or "") for m in completion)


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
    ``\\boxed{}`` (MATH), else the last number or fraction (``\\frac{1}{9}``, ``3/5``), else the whole text
    (stripped)."""
    if _HASHES in text:
        return text.rsplit(_HASHES, 1)[1].strip()
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    values = [m.group(0) for m in _STATED.finditer(text)]
    return values[-1] if values else text.strip()


def as_number(text: str) -> float | None:
    """The one number a final answer states: ``42``, ``1,000``, ``-0.75``, ``4.2e1``, ``3/5``, ``\\frac{1}{9}``,
    ``\\dfrac{1}{9}``, ``12\\%``, ``x = 5``, ``8 stamps``; None when it states none, several (``2 or 3``,
    ``(1, 2)``), or something that is not a plain number (``\\sqrt{2}``, ``2\\pi``, ``\\infty``: any other LaTeX
    command). The last-number reading this replaces scored ``\\boxed{9}`` right for ``\\frac{1}{9}``."""
    fractions = _FRACTION.sub(lambda m: f"{m.group(1).strip()}/{m.group(2).strip()}", text)
    plain = _LAYOUT.sub(" ", fractions).replace("(", " ").replace(")", " ")
    if "\\" in plain:
        return None
    found = _VALUE.findall(plain)
    if len(found) != 1:
        return None
    numerator, _, denominator = found[0].replace(",", "").replace(" ", "").partition("/")
    try:
        value = float(numerator) / float(denominator) if denominator else float(numerator)
    except (ValueError, ZeroDivisionError):
        return None
    return value if math.isfinite(value) else None


def accepted_answers(answer: Any) -> list[str]:
    """The answers a reference accepts, as datasets store them: a list of strings (also as a JSON string,
    Skywork-OR1's ``'["19", "19.0"]'``), an object with ``ground_truth`` (also as JSON, prime's ``verification_info``),
    else the one answer. A JSON list of numbers is left whole (an interval such as ``[0, 1]`` is an answer itself)."""
    value = answer
    if isinstance(answer, str) and answer.strip()[:1] in ("[", "{"):
        try:
            value = json.loads(answer)
        except ValueError:
            return [answer]
    if isinstance(value, dict) and "ground_truth" in value:
        return accepted_answers(value["ground_truth"])
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    return [str(answer)]


def _any_accepted(score: Callable[[str, str], float]) -> Callable[[str, Any], float]:
    """``score`` against each answer the reference accepts (accepted_answers): the best."""

    @functools.wraps(score)
    def scored(completion: str, answer: Any) -> float:
        return max(score(completion, a) for a in accepted_answers(answer))

    return scored


@_any_accepted
def exact_match(completion: str, answer: str) -> float:
    """1 when the completion, stripped, equals the answer, stripped."""
    return 1.0 if completion.strip() == str(answer).strip() else 0.0


class UnreadableReference(ValueError):
    """numeric_match's reference answer does not state one plain number or fraction (the message shows no data)."""


def reference_number(answer: Any) -> float | None:
    """The number a reference answer states (its final answer when it holds ``####`` or ``\\boxed{}``, read by
    ``as_number``), or None (a root, pi, an interval, several numbers, other LaTeX)."""
    reference = str(answer)
    return as_number(final_answer(reference) if _HASHES in reference or last_boxed(reference) is not None else reference)


def numbers_unread(answer: Any) -> bool:
    """Whether numeric_match cannot read a reference (one of the answers it accepts is not a number: it would raise)."""
    return any(reference_number(a) is None for a in accepted_answers(answer))


@_any_accepted
def numeric_match(completion: str, answer: str) -> float:
    """1 when the completion's final answer (``final_answer``) states the number ``answer`` states (``reference_number``;
    relative tolerance 1e-6), else 0 (a completion whose final answer is not one plain number scores 0).

    Raises:
        UnreadableReference: ``answer`` does not state one plain number or fraction (MATH's roots, pi, intervals,
            expressions): math_verify compares those. The message does not show the answer (data stays private).
    """
    want = reference_number(answer)
    if want is None:
        raise UnreadableReference(
            "numeric_match compares numbers and fractions, and a reference answer is not one (a root, pi, an "
            "interval, several numbers or other LaTeX); use math_verify for MATH-style answers"
        )
    got = as_number(final_answer(completion))
    return 1.0 if got is not None and math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9) else 0.0


@_any_accepted
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
