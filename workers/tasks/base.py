"""What every task gives the trainer: problems with verifiable rewards and their expectations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch


@dataclass(frozen=True)
class Problem:
    """One prompt with its reference answer (plain text; empty when the reward needs none)."""

    prompt: str
    answer: str


class Task(Protocol):
    """A verifiable-reward task. Rewards are in [0, 1] (THEORY.md: r)."""

    name: str

    def sample_train(self, n: int, rng: np.random.Generator) -> list[Problem]:
        """n training problems drawn i.i.d. (with replacement) from the training distribution."""
        ...

    def eval_problems(self, n: int) -> list[Problem]:
        """The held-out evaluation problems (a fixed set)."""
        ...

    def train_support(self) -> tuple[list[Problem], np.ndarray]:
        """Every training problem with its probability (for exact reference gradients)."""
        ...

    def rewards(self, problems: list[Problem], completions: list[str], rng: np.random.Generator) -> np.ndarray:
        """(S,) float32 rewards of decoded completions (text before the first EOS)."""
        ...

    def expected_reward(self, policy, problems: list[Problem], *, max_new_tokens: int, temperature: float) -> torch.Tensor:  # noqa: ANN001
        """(S,) V(x) = E[r | x] under the policy's own sampling, exact and differentiable."""
        ...

    def max_reward(self, problems: list[Problem]) -> np.ndarray:
        """(S,) best achievable expected reward per problem (for the gap)."""
        ...

    def vocabulary(self) -> str:
        """Every character prompts and answers use (for character tokenizers of presets)."""
        ...
