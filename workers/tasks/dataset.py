"""The ``dataset`` task: your dataset, your reward functions, prompts as strings or chat messages.

Rows come from a local file or save_to_disk folder (workers.data). Held-out rows are either a
seeded share of them (``eval_fraction``, default 0.1) or a second dataset (``eval_path``). Each
completion's reward is the weighted sum of the spec's reward terms (workers.rewards), called the
way TRL's GRPOTrainer calls ``reward_funcs``; the gap is ``max_reward`` minus the mean reward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from sweeps.spec import DEFAULT_EVAL_FRACTION
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
    max_reward_value: float = 1.0
    oracle_samples: int = 8  # completions per prompt for Monte Carlo V(x) (the oracle advantage)
    name: str = "dataset"
    digest: str = field(init=False, default="")  # content hash: part of repr, so caches follow the data
    _split: tuple[list[Problem], list[Problem]] = field(init=False, repr=False, compare=False)
    _scorer: Any = field(init=False, repr=False, compare=False)  # workers.rewards.reward_scorer

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

    @property
    def exact_expected_reward(self) -> bool:
        """One exact_match term: V(x) = weight * P(the answer), by teacher forcing."""
        return len(self.reward_specs) == 1 and self.reward_specs[0].get("name") == "exact_match"

    @property
    def conversational(self) -> bool:
        return is_conversational(self._split[0][0].prompt)

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
        """Call the reward terms the way TRL does (workers.rewards.terms): prompts, completions (as messages
        for conversational prompts), completion_ids, trainer_state, log_metric, log_extra and every other
        column, one entry per completion.

        Raises:
            workers.rewards.RewardError: a function failed (the message names it).
        """
        kwargs = trl_kwargs(
            [q.prompt for q in problems],
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
