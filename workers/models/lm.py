"""A transformers causal LM as a policy."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from workers.rollout import Rollout, completion_logprobs, generate, sequence_logprob


@dataclass
class LMPolicy:
    """pi(y | x) of a causal LM: completions are token sequences ended by EOS (or max_new_tokens)."""

    module: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase

    def sample(self, prompts: list[str], *, max_new_tokens: int, temperature: float) -> Rollout:
        was_training = self.module.training
        self.module.eval()
        try:
            return generate(self.module, self.tokenizer, prompts, max_new_tokens=max_new_tokens, temperature=temperature)
        finally:
            self.module.train(was_training)

    def logprobs(self, rollout: Rollout, temperature: float) -> torch.Tensor:
        return completion_logprobs(self.module, rollout, temperature)

    def answer_probability(
        self, prompts: list[str], answers: list[str], *, max_new_tokens: int, temperature: float
    ) -> torch.Tensor:
        return torch.exp(
            sequence_logprob(
                self.module, self.tokenizer, prompts, answers, max_new_tokens=max_new_tokens, temperature=temperature
            )
        )
