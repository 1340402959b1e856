"""The ``jsonl`` task: your own prompts and answers, one JSON object a line.

Each line is ``{"prompt": "...", "answer": "..."}`` (a numeric answer may be a number). A fixed
share of the lines (``eval_fraction``, chosen by a seeded permutation) is held out for evaluation.
Rewards are built-ins of workers.rewards: ``exact_match`` (the completion, stripped, equals the
answer) or ``numeric_match`` (the completion's final answer equals the answer's number).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from workers.data import read_prompt_answer_lines
from workers.rewards import exact_match, numeric_match
from workers.tasks.base import Problem, monte_carlo_value, sample_rows, split_rows, uniform_support

REWARDS: dict[str, Callable[[str, str], float]] = {"exact_match": exact_match, "numeric_match": numeric_match}


@dataclass(frozen=True)
class JsonlTask:
    path: str
    reward: str = "exact_match"
    eval_fraction: float = 0.2
    oracle_samples: int = 8  # completions per prompt for Monte Carlo V(x) when the reward is not exact_match
    name: str = "jsonl"
    digest: str = field(init=False, default="")  # content hash: part of repr, so caches follow the data
    _split: tuple[list[Problem], list[Problem]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"unknown reward {self.reward!r}; valid: {', '.join(REWARDS)}")
        path = Path(self.path)
        problems = [Problem(prompt, answer) for prompt, answer in read_prompt_answer_lines(path)]  # ValueError: the line
        object.__setattr__(self, "digest", hashlib.sha256(path.read_bytes()).hexdigest()[:16])
        object.__setattr__(self, "_split", split_rows(problems, self.eval_fraction))

    @property
    def exact_expected_reward(self) -> bool:
        return self.reward == "exact_match"

    def sample_train(self, n: int, rng: np.random.Generator) -> list[Problem]:
        return sample_rows(self._split[0], n, rng)

    def eval_problems(self, n: int) -> list[Problem]:
        held_out = self._split[1]
        return [held_out[i % len(held_out)] for i in range(n)]

    def train_support(self) -> tuple[list[Problem], np.ndarray]:
        return uniform_support(self._split[0])

    def rewards(
        self,
        problems: list[Problem],
        completions: list[str],
        rng: np.random.Generator,
        completion_ids: list[list[int]] | None = None,
    ) -> np.ndarray:
        fn = REWARDS[self.reward]
        return np.array([fn(c, q.answer) for q, c in zip(problems, completions)], dtype=np.float32)

    def expected_reward(self, policy, problems: list[Problem], *, max_new_tokens: int, temperature: float) -> torch.Tensor:
        """Exact (teacher forcing) for exact_match; otherwise a Monte Carlo mean over oracle_samples
        completions per prompt, without gradient (these samples are not counted in the budget B)."""
        if self.exact_expected_reward:
            return policy.answer_probability(
                [q.prompt for q in problems], [q.answer for q in problems], max_new_tokens=max_new_tokens, temperature=temperature
            )
        return monte_carlo_value(self, policy, problems, self.oracle_samples, max_new_tokens, temperature)

    def max_reward(self, problems: list[Problem]) -> np.ndarray:
        return np.ones(len(problems))

    def close(self) -> None:
        """Nothing to release (workers.tasks.base.Task)."""

    def vocabulary(self) -> str:
        return "".join(sorted({ch for q in self._split[0] + self._split[1] for ch in q.prompt + q.answer}))
