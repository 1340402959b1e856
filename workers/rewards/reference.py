"""The checks at submit that read a reward's reference answers: a reward gives its own reference a positive score, and
numeric_match can read every reference as a number.

``reference_failure``: each checked row's reference answer (the column the reward reads: a built-in's answer_column,
a verl scorer's ground truth; the first answer of a JSON list, the ``ground_truth`` of an object) is put in a
completion in the common answer formats (RENDERINGS); a row is scored when one of them gets a positive reward, and a
reward that scores no row so is refused (its answer column, its convention or its answer format is wrong: every trial
would train on zeros). A verl scorer is tried with both renderings of ``solution_str`` (the response alone, and the
prompt's text and the response together) so the refusal can say which one scores. Skipped: rows whose reference
holds no single answer (TinyZero countdown's ``{"target", "numbers"}``), and user functions of other conventions
(a TRL function reads whichever column it likes: which one holds the answer is not known).

``unreadable_numbers``: the references numeric_match cannot read, in a sample of up to SAMPLED rows spread over the file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from workers.data import is_conversational, lookup
from workers.rewards.builtin import accepted_answers, numbers_unread
from workers.rewards.terms import RewardError, TrainerState, WeightedReward, compute_rewards, trl_kwargs

# a right completion, in the formats the scorers we know read the final answer from: GSM8K's "####", MATH's
# \boxed{}, DeepSeek-R1 / TinyZero's <answer> tag, and the answer alone (exact_match)
RENDERINGS = (
    "Let me work it out step by step.\n#### {a}",
    "The final answer is \\boxed{{{a}}}.",
    "<think>Let me work it out.</think>\n<answer>{a}</answer>",
    "{a}",
)
SHOWN = '"... #### A", "\\boxed{A}", "<answer>A</answer>", "A"'  # the renderings, as messages name them
SAMPLED = 1000  # rows of the data file whose references the numeric check reads
PLACEHOLDER_IDS = [1, 2, 3]  # token ids of the completions, for rewards that read completion_ids (lengths)
SOLUTION_STR = ("response", "prompt_and_response")  # verl's solution_str renderings (RewardSpec.solution_str)


def reference_answer(reference: Any) -> str | None:
    """The one answer a reference holds (accepted_answers: the first of a list), None when it holds none: None, or an
    object without ``ground_truth`` (TinyZero countdown's ``{"target": 24, "numbers": [...]}``)."""
    value = reference
    if isinstance(reference, str) and reference.strip()[:1] == "{":
        try:
            value = json.loads(reference)
        except ValueError:
            value = reference
    if value is None or (isinstance(value, dict) and "ground_truth" not in value):
        return None
    return accepted_answers(reference)[0]


def answer_path(entry: dict[str, Any], term: WeightedReward) -> tuple[str | None, str | None]:
    """(the column or dotted path an entry's reward reads its reference from, its verl ``solution_str``) where the
    reference check applies: a built-in, or a function of verl's convention (the term's, which ``auto`` took when it
    was built); (None, None) otherwise."""
    if term.convention == "builtin":
        return entry.get("answer_column") or "answer", None
    if term.convention != "verl":
        return None, None
    from workers.rewards.conventions.verl import GROUND_TRUTH

    return entry.get("answer_column") or GROUND_TRUTH, entry.get("solution_str") or "response"


def reference_failure(
    terms: Sequence[WeightedReward],
    entries: Sequence[dict[str, Any]],
    rows: Sequence[dict[str, Any]],
    prompt_column: str,
    positions: Sequence[int] | None = None,
    state: TrainerState | None = None,
) -> RewardError | None:
    """The first term that scores no checked row's reference answer positively (see the module docstring), as a
    RewardError naming the reward, the column it read, a short repr of the first reference and the renderings tried
    (``index``: the entry's position in the spec, ``positions[j]`` for ``terms[j]``); None when each scores one.

    Args:
        terms, entries: the built terms and their spec entries, in the same order.
        rows: the checked rows (workers.entry.checked_indices), with ``prompt_column``.
    """
    for j, (term, entry) in enumerate(zip(terms, entries)):
        index = positions[j] if positions is not None else j
        path, solution_str = answer_path(entry, term)
        if path is None:
            continue
        references = [_at(row, path) for row in rows]
        usable = [(row, a) for row, a in zip(rows, map(reference_answer, references)) if a is not None]
        if not usable:
            continue
        scored, error = _scores_one(term, usable, prompt_column, state)
        if scored:
            continue
        first = next(r for r in references if reference_answer(r) is not None)
        said = (
            f"reward function {term.name} gives no checked row's reference answer a positive score ({len(usable)} rows): "
            f"it read {path!r} (the first: {_short(first)}) and scored a completion holding that answer as each of {SHOWN}"
        )
        if solution_str is not None:
            other = SOLUTION_STR[1 - SOLUTION_STR.index(solution_str)]
            if _scores_one(_build({**entry, "convention": "verl", "solution_str": other}), usable, prompt_column, state)[0]:
                return RewardError(
                    f"{said}, with solution_str: {solution_str}; with solution_str: {other} it scores them: set "
                    f"solution_str: {other} on this reward",
                    index,
                )
            said += " with solution_str: response and prompt_and_response"
        raised = f" (on some it raised: {error})" if error else ""
        return RewardError(
            f"{said}{raised}. A reward that never scores a right answer trains nothing: check answer_column and the "
            "answer format the reward reads",
            index,
        )
    return None


def unreadable_numbers(rows: Sequence[dict[str, Any]], path: str) -> tuple[int, int, int | None]:
    """(references numeric_match cannot read, references read, the first such row's index) over up to SAMPLED rows
    spread evenly over ``rows`` (a reference missing from its row is not counted: check_rows names that)."""
    picked = np.unique(np.linspace(0, len(rows) - 1, min(len(rows), SAMPLED)).round().astype(int)) if rows else []
    bad = [int(i) for i in picked if (value := _at(rows[i], path)) is not None and numbers_unread(value)]
    return len(bad), len(picked), (bad[0] if bad else None)


def _at(row: dict[str, Any], path: str) -> Any:
    try:
        return lookup(row, path)
    except KeyError:
        return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _build(entry: dict[str, Any]) -> WeightedReward:
    from workers.rewards.loading import build_terms

    return build_terms([entry])[0]


def _scores_one(
    term: WeightedReward, usable: list[tuple[dict[str, Any], str]], prompt_column: str, state: TrainerState | None
) -> tuple[bool, str | None]:
    """(whether some row's answer, in some rendering, gets a positive score, the first error of a rendering the term
    failed on: it counts 0)."""
    prompts = [row[prompt_column] for row, _ in usable]
    columns = [{k: v for k, v in row.items() if k != prompt_column} for row, _ in usable]
    error = None
    for rendering in RENDERINGS:
        completions = [rendering.format(a=a) for _, a in usable]
        kwargs = trl_kwargs(prompts, completions, [PLACEHOLDER_IDS] * len(usable), columns, is_conversational(prompts[0]), state)
        try:
            values = compute_rewards([term], kwargs, len(usable)).per_function[term.key]
        except RewardError as e:
            error = error or str(e)[:300]
            continue
        if (np.nan_to_num(values) > 0).any():
            return True, None
    return False, error
