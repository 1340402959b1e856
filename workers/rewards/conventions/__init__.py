"""Reward calling conventions: how each GRPO trainer calls a reward, one module each, and ``convention: auto``.

A convention turns a user's function (``FILE.py:NAME``) into a TRL-style term (workers.rewards.terms): called
with TRL's keyword arguments for the S completions of a batch, it returns S floats. The members:

- ``trl``: TRL's ``reward_funcs`` (``completions, **kwargs``), called as they are;
- ``verl``: verl's ``compute_score(data_source, solution_str, ground_truth, extra_info)``, once per completion;
- ``openrlhf``: OpenRLHF's ``reward_func(queries, prompts, labels, **kwargs)``, a batch, a dict with ``rewards``;
- ``easyr1``: EasyR1's ``compute_score(reward_inputs)``, a batch, a list of dicts with ``overall`` and parts;
- ``verifiers``: a verifiers environment (``load_environment(**kwargs)``: its rubric's functions and weights, its
  parser), or one rubric function ``(parser, completion, answer, ...)``.

A reward server (``url:``) is the ``http`` term of workers.rewards.http, not a convention of functions.

``detect(fn)`` is ``convention: auto``: the first member whose ``fits`` takes the function's signature, in the
order of ``CONVENTIONS``: each member fits its own argument names (none fits a function that takes TRL's
``completions``), and ``trl`` is last, fitting ``completions`` or a bare ``**kwargs``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workers.rewards.terms import RewardError

Term = Callable[..., Any]  # a TRL-style reward function (workers.rewards.terms)


@dataclass(frozen=True)
class Convention:
    """One trainer's reward calling convention.

    name: the spec's ``convention`` value; signature: how its functions look (for messages and docs);
    answer_column: the column its reference answer is read from by default (None: it reads every column);
    fits: whether a function's parameters are this convention's (``convention: auto``);
    wrap: ``(fn, entry, name) -> term``, the function as a TRL-style term (``entry``: the spec's reward entry,
    ``name``: the function's name for messages); raises RewardError when the entry does not suit it.
    """

    name: str
    signature: str
    answer_column: str | None
    fits: Callable[[inspect.Signature, Callable[..., Any]], bool]
    wrap: Callable[[Callable[..., Any], dict[str, Any], str], Term]


CONVENTIONS: dict[str, Convention] = {}


def register_convention(convention: Convention) -> Convention:
    """Add a member (its module imports this one and calls it at import)."""
    CONVENTIONS[convention.name] = convention
    return convention


def signature_of(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature
        return None


def detect(fn: Callable[..., Any], name: str, factory: bool = False) -> Convention:
    """``convention: auto``: the convention whose arguments the function takes; with ``factory`` (the entry has
    ``kwargs``) a function that takes none of theirs is a TRL factory (``NAME(**kwargs)`` gives the reward function).

    Raises:
        RewardError: it fits none; the message names each convention's signature and the one it saw.
    """
    sig = signature_of(fn)
    for convention in CONVENTIONS.values():
        if sig is not None and convention.fits(sig, fn):
            return convention
    if factory and sig is not None:
        return CONVENTIONS["trl"]
    seen = f"{getattr(fn, '__name__', name)}{sig}" if sig is not None else "no readable signature"
    known = "; ".join(f"{c.name}: {c.signature}" for c in CONVENTIONS.values())
    raise RewardError(
        f"reward function {name} takes the arguments of none of the reward conventions ({known}); it takes {seen}. "
        "Give convention: NAME to say which it is, or wrap it"
    )


def convention_of(fn: Callable[..., Any], entry: dict[str, Any], name: str) -> Convention:
    """The entry's convention (``auto``, the default, detects it)."""
    wanted = entry.get("convention") or "auto"
    return detect(fn, name, entry.get("kwargs") is not None) if wanted == "auto" else CONVENTIONS[wanted]


def takes(sig: inspect.Signature, *names: str) -> bool:
    """Whether the signature has a parameter of any of these names."""
    return any(n in sig.parameters for n in names)


def takes_any_keyword(sig: inspect.Signature) -> bool:
    return any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())


def accepted(sig: inspect.Signature, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments the signature takes (all of them when it has ``**kwargs``)."""
    return kwargs if takes_any_keyword(sig) else {k: v for k, v in kwargs.items() if k in sig.parameters}


def prompt_text(prompt: Any) -> str:
    """A prompt's text: a string as it is, a conversation's contents joined by newlines (not the chat template)."""
    return prompt if isinstance(prompt, str) else "\n".join(str(m.get("content") or "") for m in prompt)


def numbers(values: Any) -> list[Any]:
    """A batch's scores as a list: a list or tuple as it is, a tensor or array through ``tolist()``."""
    return values.tolist() if hasattr(values, "tolist") else list(values)


def mean_of(value: Any) -> float | None:
    """A logged value's mean (a number, a list, a tensor); None when it is not numeric."""
    plain = value.tolist() if hasattr(value, "tolist") else value  # a tensor or array; a 0-d one gives a number
    try:
        flat = [float(v) for v in (plain if isinstance(plain, (list, tuple)) else [plain])]
    except (TypeError, ValueError):
        return None
    return sum(flat) / len(flat) if flat else None


def settled(results: list[Any], finish: Callable[[list[Any]], Any]) -> Any:
    """``finish(results)``, or a coroutine of it when some results are awaitables (async user functions: the
    term's caller, workers.rewards.terms.compute_rewards, awaits it on its event loop, all of them together)."""
    if not any(inspect.isawaitable(r) for r in results):
        return finish(results)

    async def gathered() -> Any:
        import asyncio

        return finish(list(await asyncio.gather(*(r if inspect.isawaitable(r) else _ready(r) for r in results))))

    return gathered()


async def _ready(value: Any) -> Any:
    return value


# the members, in detection order (each registers itself)
from workers.rewards.conventions import openrlhf, easyr1, verifiers, verl, trl  # noqa: E402, F401, I001

__all__ = ["CONVENTIONS", "Convention", "convention_of", "detect", "register_convention"]
