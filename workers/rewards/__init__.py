"""Rewards of dataset tasks: the built-ins, users' functions in their trainer's convention, reward servers, their sum.

- ``builtin``: exact_match, numeric_match, math_verify (scores of one completion's text);
- ``terms``: TRL's calling convention (keyword arguments, async, log_metric / log_extra, trainer_state)
  and the weighted sum of the terms;
- ``conventions``: how TRL, verl, OpenRLHF, EasyR1 and verifiers call a reward, one module each, and ``auto``;
- ``http``: a reward server (OpenRLHF's remote reward-model request, or plain JSON), with retries;
- ``loading``: reward files as real modules, and the spec's entries as terms;
- ``process``: the child process in whose main thread users' reward code runs.

``reward_scorer(specs)`` is what a task holds: the terms in this process when they are built-ins that
run anywhere, else in a RewardProcess.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workers.rewards.builtin import BUILTIN_REWARDS, exact_match, final_answer, math_verify, math_verify_available, numeric_match
from workers.rewards.terms import RewardBatch, RewardError, TrainerState, WeightedReward, compute_rewards, metric_key, trl_kwargs


class InProcessRewards:
    """Built-in terms that need no process of their own (exact_match, numeric_match), called here."""

    def __init__(self, specs: Sequence[dict[str, Any]]) -> None:
        from workers.rewards.loading import build_terms

        self.terms = build_terms(specs)
        self.names = [(t.name, t.key) for t in self.terms]
        self.conventions = [t.convention for t in self.terms]

    def score(self, kwargs: dict[str, Any], n: int) -> RewardBatch:
        return compute_rewards(self.terms, kwargs, n)

    def close(self) -> None:
        pass


def reward_scorer(specs: Sequence[dict[str, Any]]) -> Any:
    """InProcessRewards or a RewardProcess for the spec's reward entries (both: ``score(kwargs, n)``, ``names``,
    ``conventions`` (each term's WeightedReward.convention: what ``auto`` took), ``close()``). Raises RewardError
    when a term cannot be loaded."""
    from workers.rewards.process import RewardProcess, needs_process

    return RewardProcess(specs) if needs_process(specs) else InProcessRewards(specs)
