"""What every task gives the trainer: problems with verifiable rewards and their expectations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch


@dataclass(frozen=True)
class Problem:
    """One prompt with its reference answer and the rest of its dataset row.

    prompt: as the model reads it: a string, or chat messages ``[{role, content}]`` (TRL's conversational format),
        which the policy renders with the chat template.
    answer: the reference answer as text (empty when the reward needs none).
    columns: the row's other columns, passed to reward functions (dataset tasks).
    data_prompt: the prompt as the dataset stores it, where the model reads another (a string prompt given to the
        model as a user message, task.prompt_format chat); None: the same as ``prompt``. Reward functions see this one.
    """

    prompt: str | list[dict[str, Any]]
    answer: str
    columns: dict[str, Any] = field(default_factory=dict, compare=False)
    data_prompt: str | list[dict[str, Any]] | None = field(default=None, compare=False)

    @property
    def stored_prompt(self) -> str | list[dict[str, Any]]:
        """The prompt as the dataset stores it (what reward functions receive as ``prompts``)."""
        return self.prompt if self.data_prompt is None else self.data_prompt

    @property
    def key(self) -> str:
        """The problem's identity as text (its prompt and answer): draws of one problem share it."""
        return json.dumps([self.prompt, self.answer], sort_keys=True, default=str)


class Task(Protocol):
    """A verifiable-reward task. Rewards are floats up to ``max_reward`` (in [0, 1] for the built-in tasks; THEORY.md: r)."""

    name: str

    def sample_train(self, n: int, rng: np.random.Generator) -> list[Problem]:
        """n training problems drawn i.i.d. (with replacement) from the training distribution."""
        ...

    def eval_problems(self, n: int) -> list[Problem]:
        """The held-out evaluation problems: the same list for every trial, machine and seed (the split is fixed).

        The rule (spec ``eval.prompts`` = n): the held-out split in its fixed order, cycled to n problems when the
        split is smaller, for a task whose expected reward is exact (arithmetic, jsonl: a repeat only weights the
        mean); at most n, each once, for a dataset task, whose eval samples completions (a repeat would count one
        prompt's samples as independent prompts in the standard error); every context once for the bandit, whose
        held-out set is its context distribution (n is ignored).
        """
        ...

    def train_support(self) -> tuple[list[Problem], np.ndarray]:
        """Every training problem with its probability (for exact reference gradients)."""
        ...

    def rewards(
        self,
        problems: list[Problem],
        completions: list[str],
        rng: np.random.Generator,
        completion_ids: list[list[int]] | None = None,
    ) -> np.ndarray:
        """(S,) float32 rewards of decoded completions (text before the first stop id)."""
        ...

    def expected_reward(self, policy, problems: list[Problem], *, max_new_tokens: int, temperature: float) -> torch.Tensor:
        """(S,) V(x) = E[r | x] under the policy's own sampling: exact and differentiable where the task has
        ``exact_expected_reward``, else a Monte Carlo estimate without gradient."""
        ...

    def max_reward(self, problems: list[Problem]) -> np.ndarray:
        """(S,) best achievable expected reward per problem (for the gap)."""
        ...

    def vocabulary(self) -> str:
        """Every character prompts and answers use (for character tokenizers of presets)."""
        ...

    @property
    def exact_expected_reward(self) -> bool:
        """Whether expected_reward is exact (and differentiable), not a Monte Carlo estimate."""
        ...

    def close(self) -> None:
        """Release what the task holds while trials use it (a dataset task's reward process); nothing for most."""
        ...


class ExactTask:
    """What the generated tasks share (arithmetic, the bandit): V(x) computed exactly, nothing to release."""

    exact_expected_reward = True  # workers.tasks.base.Task

    def close(self) -> None:
        """Nothing to release (workers.tasks.base.Task)."""


@runtime_checkable
class RewardTerms(Protocol):
    """A task whose reward is a weighted sum of named terms from reward functions (the dataset task): each term's spec
    (its ``weight`` among them) and metric key in the same order, ``score`` that gives every term with what the
    functions logged (TRL's keyword arguments, token ids and trainer state included), and the training rows an
    epoch has (for TRL's trainer_state)."""

    reward_specs: tuple[dict[str, Any], ...]

    @property
    def reward_keys(self) -> list[str]:
        """Each term's metric key (``reward/<key>``), in the order of ``reward_specs``."""
        ...

    @property
    def train_rows(self) -> int:
        """Rows of the training split."""
        ...

    def score(
        self, problems: list[Problem], completions: list[str], completion_ids: list[list[int]] | None = None, state: Any = None
    ) -> Any:
        """A workers.rewards.RewardBatch: the weighted reward, each term's values, abstentions and what was logged."""
        ...


@runtime_checkable
class ExactComponents(Protocol):
    """A task whose variance components (tau2, sigma2, kappa; THEORY.md) are known exactly for a tabular policy's
    logits (the bandit): what the probe and the gradient-MSE measure are checked against."""

    def exact_components(self, logits: np.ndarray | None = None, temperature: float = 1.0) -> Any:
        """workers.tasks.bandit.VarianceComponents at ``logits`` (K,) float64 and ``temperature``."""
        ...


def monte_carlo_value(
    task: Task, policy, problems: list[Problem], samples: int, max_new_tokens: int, temperature: float
) -> torch.Tensor:
    """(S,) V(x) estimated by the mean reward of ``samples`` completions per prompt (no gradient;
    these samples are not counted in the budget B)."""
    expanded = [q for q in problems for _ in range(samples)]
    ro = policy.sample([q.prompt for q in expanded], max_new_tokens=max_new_tokens, temperature=temperature)
    r = task.rewards(expanded, ro.texts, np.random.default_rng(0), completion_ids_of(ro))
    return torch.as_tensor(r.reshape(len(problems), samples).mean(axis=1))


def completion_ids_of(rollout) -> list[list[int]]:  # workers.rollout.Rollout
    """Each completion's token ids through its first stop id (TRL's ``completion_ids``)."""
    ids, mask = rollout.completion_ids, rollout.completion_mask.bool()
    return [row[m].tolist() for row, m in zip(ids, mask)]


SPLIT_SEED = 12345  # the held-out split of a data file is the same for every trial, sweep and machine


def split_rows(problems: list[Problem], eval_fraction: float, seed: int = SPLIT_SEED) -> tuple[list[Problem], list[Problem]]:
    """(train, held out) by a seeded permutation; each keeps at least one row (jsonl and dataset tasks).

    Raises:
        ValueError: fewer than 2 rows.
    """
    if len(problems) < 2:
        raise ValueError(f"needs at least 2 rows (one to train, one to evaluate), found {len(problems)}")
    perm = np.random.default_rng(seed).permutation(len(problems))
    n_eval = min(len(problems) - 1, max(1, int(round(eval_fraction * len(problems)))))
    return [problems[i] for i in perm[n_eval:]], [problems[i] for i in perm[:n_eval]]


def sample_rows(rows: Sequence[Problem], n: int, rng: np.random.Generator) -> list[Problem]:
    """``n`` rows drawn uniformly with replacement (a training batch's prompts)."""
    return [rows[i] for i in rng.integers(0, len(rows), size=n)]


def uniform_support(rows: Sequence[Problem]) -> tuple[list[Problem], np.ndarray]:
    """Every row with probability 1 / len(rows) (Task.train_support of a task that samples rows uniformly)."""
    return list(rows), np.full(len(rows), 1.0 / len(rows))
