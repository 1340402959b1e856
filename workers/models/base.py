"""What the trainer and the probe need of a policy, whatever it is (transformers LM or tabular)."""

from __future__ import annotations

from typing import Any, Protocol

import torch

from workers.rollout import Rollout


class Policy(Protocol):
    """A stochastic policy pi(y | x) with parameters theta.

    ``module`` holds the parameters (optimizers, checkpoints, train/eval modes act on it).
    """

    module: torch.nn.Module
    # sampling fields of a model folder's generation_config that sampling does not apply (listed on the trial's run)
    ignored_generation_config: dict[str, Any]

    def sample(self, prompts: list[str], *, max_new_tokens: int, temperature: float, group_size: int = 1) -> Rollout:
        """One completion per prompt; with group_size G, prompts come as G adjacent copies of each."""
        ...

    def logprobs(self, rollout: Rollout, temperature: float) -> torch.Tensor:
        """(S, L) log-probs of the rollout's completion tokens (differentiable; mask with completion_mask)."""
        ...

    def logprobs_entropy(self, rollout: Rollout, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(S, L) log-probs as ``logprobs`` and (S, L) entropy of the sampling distribution (nats)."""
        ...

    def answer_probability(
        self, prompts: list[str], answers: list[str], *, max_new_tokens: int, temperature: float
    ) -> torch.Tensor:
        """(S,) probability that sampling returns exactly ``answers[i]`` (differentiable)."""
        ...

    def render(self, prompt: Any) -> str:
        """The prompt as the model reads it (a chat prompt through its template), for tables of samples."""
        ...
