"""The ``tabular`` preset: a softmax policy over K arms per context, parameters = the logits.

THEORY.md's check instance: pi(a | x) = softmax(theta_x / temperature)_a, theta of shape (M, K).
A prompt is a context index ("7"), a completion is one arm index ("3").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from workers.rollout import Rollout


class TabularSoftmax(torch.nn.Module):
    """theta: (M, K) float32 logits."""

    def __init__(self, logits: np.ndarray) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.as_tensor(logits, dtype=torch.float32).clone())


@dataclass
class TabularPolicy:
    module: TabularSoftmax
    ignored_generation_config: dict = field(default_factory=dict)  # no generation_config: nothing ignored

    def render(self, prompt: Any) -> str:
        """The context's number (workers.models.base.Policy)."""
        return str(prompt)

    def probs(self, contexts: torch.Tensor, temperature: float) -> torch.Tensor:
        """(S,) long contexts -> (S, K) action probabilities (differentiable)."""
        return torch.softmax(self.module.logits[contexts] / temperature, dim=-1)

    def sample(self, prompts: list[str], *, max_new_tokens: int, temperature: float, group_size: int = 1) -> Rollout:
        ctx = torch.tensor([int(p) for p in prompts])
        with torch.no_grad():
            arms = torch.multinomial(self.probs(ctx, temperature), 1)
        s = len(prompts)
        return Rollout(
            input_ids=torch.cat([ctx[:, None], arms], dim=1),
            attention_mask=torch.ones(s, 2, dtype=torch.long),
            completion_mask=torch.ones(s, 1),
            prompt_len=1,
            texts=[str(int(a)) for a in arms[:, 0]],
            truncated=torch.zeros(s, dtype=torch.bool),
        )

    def logprobs(self, rollout: Rollout, temperature: float) -> torch.Tensor:
        return self.logprobs_entropy(rollout, temperature)[0]

    def logprobs_entropy(self, rollout: Rollout, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(S, 1) log-probs of the sampled arms and (S, 1) entropies (nats)."""
        ctx, arms = rollout.input_ids[:, 0], rollout.input_ids[:, 1:]
        logp_all = torch.log_softmax(self.module.logits[ctx] / temperature, dim=-1)
        return logp_all.gather(1, arms), -(logp_all.exp() * logp_all).sum(dim=-1, keepdim=True)

    def answer_probability(
        self, prompts: list[str], answers: list[str], *, max_new_tokens: int, temperature: float
    ) -> torch.Tensor:
        ctx = torch.tensor([int(p) for p in prompts])
        arms = torch.tensor([int(a) for a in answers])
        return self.probs(ctx, temperature).gather(1, arms[:, None]).squeeze(1)
