"""What every task gives the trainer: problems with verifiable answers and a reward."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Problem:
    """One prompt with its reference answer (both plain text)."""

    prompt: str
    answer: str


class Task(Protocol):
    """A verifiable-reward task. Rewards are in [0, 1] (THEORY.md: r)."""

    name: str

    def sample_train(self, n: int, rng: np.random.Generator) -> list[Problem]:
        """n training problems drawn i.i.d. (with replacement) from the training split."""
        ...

    def eval_problems(self, n: int) -> list[Problem]:
        """The first n problems of the fixed held-out split (cycled when n exceeds it)."""
        ...

    def reward(self, completion: str, answer: str) -> float:
        """Reward of one decoded completion (text before the first EOS)."""
        ...

    def vocabulary(self) -> str:
        """Every character prompts and answers use (for character tokenizers of presets)."""
        ...
