"""The ``arithmetic`` task: prompts ``a+b=``, reward 1 for the exact sum and 0 otherwise."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from workers.tasks.base import SPLIT_SEED, ExactTask, Problem

EVAL_FRACTION = 0.25  # share of all (a, b) pairs held out for evaluation


@dataclass(frozen=True)
class ArithmeticTask(ExactTask):
    """Two-operand addition with 0 <= a, b <= max_operand.

    The (max_operand + 1)^2 pairs are split once, by a fixed permutation, into a training split and
    a held-out split (EVAL_FRACTION of the pairs) that training never samples.
    """

    max_operand: int = 49
    name: str = "arithmetic"
    _split: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = self.max_operand + 1
        perm = np.random.default_rng(SPLIT_SEED).permutation(n * n)
        n_eval = max(1, int(EVAL_FRACTION * n * n))
        object.__setattr__(self, "_split", (perm[n_eval:], perm[:n_eval]))

    def _problem(self, idx: int) -> Problem:
        a, b = divmod(int(idx), self.max_operand + 1)
        return Problem(prompt=f"{a}+{b}=", answer=str(a + b))

    def sample_train(self, n: int, rng: np.random.Generator) -> list[Problem]:
        train = self._split[0]
        return [self._problem(i) for i in train[rng.integers(0, train.size, size=n)]]

    def eval_problems(self, n: int) -> list[Problem]:
        held_out = self._split[1]
        return [self._problem(held_out[i % held_out.size]) for i in range(n)]

    def train_support(self) -> tuple[list[Problem], np.ndarray]:
        train = self._split[0]
        return [self._problem(i) for i in train], np.full(train.size, 1.0 / train.size)

    def rewards(
        self,
        problems: list[Problem],
        completions: list[str],
        rng: np.random.Generator,
        completion_ids: list[list[int]] | None = None,
    ) -> np.ndarray:
        """1 for the exact sum (surrounding whitespace ignored), else 0."""
        return np.array([c.strip() == q.answer for q, c in zip(problems, completions)], dtype=np.float32)

    def expected_reward(self, policy, problems: list[Problem], *, max_new_tokens: int, temperature: float) -> torch.Tensor:
        """V(x) = P(the completion is exactly the answer), by teacher forcing (exact, differentiable)."""
        return policy.answer_probability(
            [q.prompt for q in problems], [q.answer for q in problems], max_new_tokens=max_new_tokens, temperature=temperature
        )

    def max_reward(self, problems: list[Problem]) -> np.ndarray:
        return np.ones(len(problems))

    def vocabulary(self) -> str:
        return "0123456789+="
