"""The ``dataset`` task: your dataset, your reward functions, prompts as strings or chat messages.

Rows come from a local file or save_to_disk folder (workers.data). Held-out rows are either a
seeded share of them (``eval_fraction``, default 0.1) or a second dataset (``eval_path``). Each
completion's reward is the weighted sum of the spec's reward terms (workers.rewards), called the
way TRL's GRPOTrainer calls ``reward_funcs``; the gap is ``max_reward`` minus the mean reward.

A string prompt reaches the model as ``prompt_format`` says: ``chat`` as one user message
``[{"role": "user", "content": s}]`` that the policy renders with its chat template and a generation
prompt (OpenRLHF's PromptDataset with apply_chat_template, EasyR1, NeMo-RL, prime-rl), ``raw`` as it
is (TRL), ``auto`` chat where the model has a chat template, else raw; ``prompt_template`` formats
``s`` first (sweeps.prompt_template). Only the model knows whether it has a template, so the task is
built with the data's prompts and ``read_by`` gives the task as a loaded model reads it
(workers.batch.setup, once the policy is loaded): every Problem's ``prompt`` is then what the policy
samples from, scores the PPO ratio on and is evaluated on (and what TRL's trainer gets), while reward
functions keep the data's own prompt (``Problem.stored_prompt``: a string stays a string, completions
stay strings). Message-list prompts are the same under every format (always templated, as
``model.chat_template`` says).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, get_args

import numpy as np
import torch

from sweeps.prompt_template import load_prompt_template
from sweeps.spec import DEFAULT_EVAL_FRACTION, DatasetTaskSpec
from workers.data import check_rows, content_digest, is_conversational, load_rows, lookup
from workers.rewards import RewardBatch, TrainerState, reward_scorer, trl_kwargs
from workers.rewards.loading import answer_paths
from workers.tasks.base import Problem, monte_carlo_value, sample_rows, split_rows, uniform_support


def _problems(rows: list[dict[str, Any]], prompt_column: str, answer_column: str | None) -> list[Problem]:
    return [
        Problem(
            row[prompt_column],
            "" if answer_column is None else str(lookup(row, answer_column)),
            {k: v for k, v in row.items() if k != prompt_column},
        )
        for row in rows
    ]


PROMPT_FORMATS = get_args(DatasetTaskSpec.model_fields["prompt_format"].annotation)  # the spec's, written there once


def resolve_prompt_format(prompt_format: str, templated: bool) -> str:
    """``chat`` or ``raw``: how string prompts reach a model that renders a chat template (``templated``: its
    tokenizer has one and model.chat_template is not false) or does not; ``auto`` is chat exactly when templated.

    Raises:
        ValueError: an unknown format (listing the allowed), or ``chat`` on a model without a chat template.
    """
    if prompt_format not in PROMPT_FORMATS:
        raise ValueError(f"task.prompt_format {prompt_format!r}; allowed: {', '.join(PROMPT_FORMATS)}")
    if prompt_format == "chat" and not templated:
        raise ValueError(
            "task.prompt_format chat: the model has no chat template to render string prompts with (its tokenizer has "
            "none, or model.chat_template is false); allowed: task.prompt_format auto or raw, or a model with a chat template"
        )
    return "chat" if prompt_format == "chat" or (prompt_format == "auto" and templated) else "raw"


def _as_read(problem: Problem, chat: bool, fill: Callable[[str], str] | None) -> Problem:
    """``problem`` with a string prompt as the model reads it: formatted by ``fill`` (the prompt template), as one
    user message under ``chat``; the data's prompt kept for the rewards. A message list stays as it is."""
    source = problem.stored_prompt
    if not isinstance(source, str):
        return problem
    text = fill(source) if fill is not None else source
    prompt: str | list[dict[str, Any]] = [{"role": "user", "content": text}] if chat else text
    return replace(problem, prompt=prompt, data_prompt=None if prompt == source else source)


@dataclass(frozen=True)
class DatasetTask:
    """Rows of a local dataset with TRL-style reward functions.

    Raises (on construction):
        workers.data.DatasetError: the data cannot be read or lacks a column.
        workers.rewards.RewardError: a user reward function cannot be loaded.

    User reward functions (and math_verify) run in a reward process of the task's own
    (workers.rewards.process): ``close()`` stops it, as does garbage collection.
    """

    path: str
    reward_specs: tuple[dict[str, Any], ...]
    split: str | None = None
    prompt_column: str = "prompt"
    eval_fraction: float | None = None
    eval_path: str | None = None
    label: str | None = None
    prompt_format: str = "auto"  # auto until read_by resolves it to chat or raw (module docstring)
    prompt_template: str | None = None
    max_reward_value: float = 1.0
    oracle_samples: int = 8  # completions per prompt for Monte Carlo V(x) (the oracle advantage)
    name: str = "dataset"
    digest: str = field(init=False, default="")  # content hash: part of repr, so caches follow the data
    _split: tuple[list[Problem], list[Problem]] = field(init=False, repr=False, compare=False)
    _scorer: Any = field(init=False, repr=False, compare=False)  # workers.rewards.reward_scorer
    _fill: Callable[[str], str] | None = field(init=False, repr=False, compare=False)  # the prompt template

    def __post_init__(self) -> None:
        answers = answer_paths(self.reward_specs)
        answer = answers[0] if answers else None
        rows = load_rows(self.path, self.split)
        check_rows(rows, self.prompt_column, answers)
        if self.eval_path is not None:
            held = load_rows(self.eval_path, self.split)
            check_rows(held, self.prompt_column, answers)
            train, held_out = _problems(rows, self.prompt_column, answer), _problems(held, self.prompt_column, answer)
        else:
            problems = _problems(rows, self.prompt_column, answer)
            train, held_out = split_rows(problems, self.eval_fraction or DEFAULT_EVAL_FRACTION)
        digest = content_digest(self.path, *([self.eval_path] if self.eval_path else []))
        object.__setattr__(self, "digest", digest[:16])
        object.__setattr__(self, "_split", (train, held_out))
        object.__setattr__(self, "_scorer", reward_scorer(self.reward_specs))
        object.__setattr__(self, "_fill", load_prompt_template(self.prompt_template) if self.prompt_template else None)

    def read_by(self, templated: bool) -> DatasetTask:
        """This task as a model reads its prompts (module docstring): ``templated``, whether the model renders a chat
        template, resolves ``auto``; the returned task's ``prompt_format`` is ``chat`` or ``raw`` and its problems'
        ``prompt`` what the model reads. The data, its split and the reward process are this task's (not read again).

        Raises:
            ValueError: prompt_format chat on a model without a chat template (resolve_prompt_format).
        """
        resolved = resolve_prompt_format(self.prompt_format, templated)
        task = copy.copy(self)
        object.__setattr__(task, "prompt_format", resolved)
        split = tuple([_as_read(q, resolved == "chat", self._fill) for q in part] for part in self._split)
        object.__setattr__(task, "_split", split)
        return task

    @property
    def prompt_params(self) -> dict[str, str]:
        """The trial run's params of how prompts reach the model: ``task.prompt_format`` (chat or raw once read_by
        resolved it) and ``task.prompt_template`` (the file, when one formats them)."""
        template = {"task.prompt_template": self.prompt_template} if self.prompt_template else {}
        return {"task.prompt_format": self.prompt_format, **template}

    @property
    def reward_params(self) -> dict[str, str]:
        """The trial run's params of how each reward term is called: ``task.rewards.<i>.convention`` (builtin, http,
        or the trainer convention of a function: what ``convention: auto`` took, workers.rewards.conventions)."""
        return {f"task.rewards.{i}.convention": c for i, c in enumerate(self._scorer.conventions)}

    @property
    def exact_expected_reward(self) -> bool:
        """One exact_match term: V(x) = weight * P(the answer), by teacher forcing."""
        return len(self.reward_specs) == 1 and self.reward_specs[0].get("name") == "exact_match"

    @property
    def conversational(self) -> bool:
        """Whether the data's prompts are chat messages (TRL's conversational format: completions reach the rewards
        as messages), whatever the model reads."""
        return is_conversational(self._split[0][0].stored_prompt)

    def sample_train(self, n: int, rng: np.random.Generator) -> list[Problem]:
        return sample_rows(self._split[0], n, rng)

    def eval_problems(self, n: int) -> list[Problem]:
        held_out = self._split[1]
        return [held_out[i % len(held_out)] for i in range(min(n, len(held_out)))]

    @property
    def train_rows(self) -> int:
        """Rows of the training split (an epoch, for trainer_state)."""
        return len(self._split[0])

    @property
    def reward_keys(self) -> list[str]:
        """Each reward term's metric key, in the order of ``reward_specs`` (workers.tasks.base.RewardTerms)."""
        return [key for _, key in self._scorer.names]

    def close(self) -> None:
        """Stop the reward process, if the rewards run in one (also done when the task is garbage collected)."""
        self._scorer.close()

    def train_support(self) -> tuple[list[Problem], np.ndarray]:
        return uniform_support(self._split[0])

    def score(
        self,
        problems: list[Problem],
        completions: list[str],
        completion_ids: list[list[int]] | None = None,
        state: TrainerState | None = None,
    ) -> RewardBatch:
        """Call the reward terms the way TRL does (workers.rewards.terms): prompts as the data stores them,
        completions (as messages for conversational data), completion_ids, trainer_state, log_metric, log_extra and every other
        column, one entry per completion.

        Raises:
            workers.rewards.RewardError: a function failed (the message names it).
        """
        kwargs = trl_kwargs(
            [q.stored_prompt for q in problems],  # the data's prompts, not the model's rendering of them
            completions,
            completion_ids if completion_ids is not None else [[] for _ in completions],
            [q.columns for q in problems],
            self.conversational,
            state,
        )
        return self._scorer.score(kwargs, len(completions))

    def rewards(
        self,
        problems: list[Problem],
        completions: list[str],
        rng: np.random.Generator,
        completion_ids: list[list[int]] | None = None,
    ) -> np.ndarray:
        return self.score(problems, completions, completion_ids).rewards

    def expected_reward(self, policy, problems: list[Problem], *, max_new_tokens: int, temperature: float) -> torch.Tensor:
        """Exact (teacher forcing) for one exact_match term; otherwise a Monte Carlo mean over
        oracle_samples completions per prompt."""
        if self.exact_expected_reward:
            weight = float(self.reward_specs[0].get("weight", 1.0))
            p = policy.answer_probability(
                [q.prompt for q in problems], [q.answer for q in problems], max_new_tokens=max_new_tokens, temperature=temperature
            )
            return weight * p
        return monte_carlo_value(self, policy, problems, self.oracle_samples, max_new_tokens, temperature)

    def max_reward(self, problems: list[Problem]) -> np.ndarray:
        return np.full(len(problems), self.max_reward_value)

    def vocabulary(self) -> str:
        raise ValueError("the dataset task has no character vocabulary: use preset chat-tiny or model.path")


def dataset_task(*, rewards: list[dict[str, Any]], max_reward: float = 1.0, **options: Any) -> DatasetTask:
    """DatasetTask from the spec's fields (``rewards`` and ``max_reward`` renamed: they are methods of a task)."""
    return DatasetTask(reward_specs=tuple(rewards), max_reward_value=max_reward, **options)
