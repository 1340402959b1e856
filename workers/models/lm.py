"""A transformers causal LM as a policy."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from workers.rollout import Rollout, completion_logprobs, completion_logprobs_entropy, generate, sequence_logprob


@dataclass
class LMPolicy:
    """pi(y | x) of a causal LM: completions are token sequences ended by EOS (or max_new_tokens).

    On CUDA, forward passes run under bf16 autocast (log-softmax stays float32).
    """

    module: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase

    def _autocast(self) -> contextlib.AbstractContextManager:
        device = next(self.module.parameters()).device
        if device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def sample(self, prompts: list[str], *, max_new_tokens: int, temperature: float, group_size: int = 1) -> Rollout:
        was_training = self.module.training
        self.module.eval()
        try:
            with self._autocast():
                return generate(self.module, self.tokenizer, prompts, max_new_tokens=max_new_tokens,
                                temperature=temperature, group_size=group_size)  # fmt: skip
        finally:
            self.module.train(was_training)

    def logprobs(self, rollout: Rollout, temperature: float) -> torch.Tensor:
        with self._autocast():
            return completion_logprobs(self.module, rollout, temperature)

    def logprobs_entropy(self, rollout: Rollout, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
        with self._autocast():
            return completion_logprobs_entropy(self.module, rollout, temperature)

    def answer_probability(
        self, prompts: list[str], answers: list[str], *, max_new_tokens: int, temperature: float
    ) -> torch.Tensor:
        with self._autocast():
            logp = sequence_logprob(self.module, self.tokenizer, prompts, answers, max_new_tokens=max_new_tokens,
                                    temperature=temperature)  # fmt: skip
        return torch.exp(logp)
