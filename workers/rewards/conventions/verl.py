"""verl's convention: ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **reward_kwargs)``,
called once per completion, a float or a dict with ``score`` back.

Source: verl, ``NaiveRewardManager.__call__`` (verl/workers/reward_manager/naive.py) and ``get_custom_reward_fn``
(verl/trainer/ppo/reward.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from workers.rewards.builtin import text_of
from workers.rewards.conventions import Convention, accepted, prompt_text, register_convention, settled, takes
from workers.rewards.terms import RewardError, column_values

GROUND_TRUTH = "reward_model.ground_truth"  # verl's parquet layout (examples/data_preprocess/*.py)
# verl's batched scorer (BatchRewardManager: compute_score_batched(data_sources, solution_strs, ground_truths,
# extra_infos)): its argument names, which the per-completion convention never has.
BATCHED = frozenset({"data_sources", "solution_strs", "ground_truths", "extra_infos"})


def fits(sig: inspect.Signature, fn: Callable[..., Any]) -> bool:
    """verl's scorers (the custom ``compute_score`` and its per-dataset ones) all take ``solution_str``."""
    return takes(sig, "solution_str") and not takes(sig, "completions")


def verl_scorer(
    compute_score: Callable[..., Any], ground_truth: str, reward_kwargs: dict[str, Any], with_prompt: bool = False
) -> Callable[..., Any]:
    """verl's ``compute_score`` as a TRL-style term: called once per completion with the completion's text, the row's
    ``data_source`` and ``extra_info`` columns and the value at ``ground_truth`` (a dotted path), plus
    ``reward_kwargs`` (verl's ``custom_reward_function.reward_kwargs``). Arguments the function does not accept are
    not passed (so verl's per-dataset scorers, ``gsm8k.compute_score(solution_str, ground_truth)``, work too). A
    result is a float or verl's dict with ``score``; the dict's other keys become ``log_extra`` columns.
    ``with_prompt`` (``solution_str: prompt_and_response``): solution_str is the prompt's text followed by the
    completion's, as TinyZero decodes them together (a chat prompt's messages' contents, joined by newlines: not the
    chat template).
    """
    sig = inspect.signature(compute_score)

    def score_all(completions: list[Any], log_extra: Callable[[str, list], None], **columns: Any) -> Any:
        n = len(completions)
        truths = column_values(columns, ground_truth, n)
        sources = columns.get("data_source") or [None] * n
        prompts = [prompt_text(p) for p in columns.get("prompts") or [""] * n] if with_prompt else [""] * n
        infos = columns.get("extra_info") or [None] * n
        calls = [
            accepted(
                sig,
                {
                    "data_source": sources[i],
                    "solution_str": prompts[i] + text_of(completions[i]),
                    "ground_truth": truths[i],
                    "extra_info": dict(infos[i]) if isinstance(infos[i], dict) else infos[i],
                    **reward_kwargs,
                },
            )
            for i in range(n)
        ]
        return settled([compute_score(**kw) for kw in calls], lambda results: _scores(results, log_extra))

    score_all.__name__ = getattr(compute_score, "__name__", "compute_score")
    return score_all


def _scores(results: list[Any], log_extra: Callable[[str, list], None]) -> list[float | None]:
    """verl results (floats, or dicts with ``score`` and other keys) -> the scores; other keys -> log_extra."""
    if not any(isinstance(r, dict) for r in results):
        return results
    for r in results:
        if isinstance(r, dict) and "score" not in r:
            raise ValueError(f"a verl scorer's dict needs a 'score' key; got keys {sorted(r)[:10]}")
    keys = dict.fromkeys(k for r in results if isinstance(r, dict) for k in r if k != "score")
    for key in keys:
        log_extra(key, [r.get(key) if isinstance(r, dict) else None for r in results])
    return [r["score"] if isinstance(r, dict) else r for r in results]


def wrap(fn: Callable[..., Any], entry: dict[str, Any], name: str) -> Callable[..., Any]:
    if BATCHED & set(inspect.signature(fn).parameters):
        raise RewardError(
            f"reward function {name} takes verl's batched convention (lists: data_sources, solution_strs, "
            "ground_truths, extra_infos), which groupscale does not call: give the per-completion "
            "compute_score(data_source, solution_str, ground_truth, extra_info) it wraps"
        )
    with_prompt = entry.get("solution_str") == "prompt_and_response"
    return verl_scorer(fn, entry.get("answer_column") or GROUND_TRUTH, dict(entry.get("kwargs") or {}), with_prompt)


VERL = register_convention(
    Convention(
        "verl",
        "compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float | {score}",
        GROUND_TRUTH,
        fits,
        wrap,
    )
)
