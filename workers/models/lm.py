"""A transformers causal LM as a policy."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from workers.models.prompts import Prompt, PromptEncoder, stop_token_ids
from workers.rollout import (
    Rollout,
    completion_logprobs,
    completion_logprobs_entropy,
    generate,
    neutral_generation_config,
    sequence_logprob,
)


@dataclass
class LMPolicy:
    """pi(y | x) of a causal LM: completions are token sequences ended by a stop id (or max_new_tokens).

    Prompts (strings or chat messages) go through one PromptEncoder for sampling and teacher
    forcing alike. On CUDA, forward passes run under bf16 autocast (log-softmax stays float32).

    Attributes:
        chat_template_kwargs: extra variables of the chat template (``enable_thinking: false``), as TRL's.
        stop_ids: generation_config.eos_token_id (int or list) and the tokenizer's EOS, in that order.
        ignored_generation_config: the sampling fields of the model's generation_config that sampling does
            not apply (workers.rollout.neutral_generation_config), field -> value.
    """

    module: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    chat_template: bool = True
    chat_template_kwargs: dict = field(default_factory=dict)
    encoder: PromptEncoder = field(init=False)
    stop_ids: tuple[int, ...] = field(init=False)
    ignored_generation_config: dict = field(init=False)

    def __post_init__(self) -> None:
        self.encoder = PromptEncoder(self.tokenizer, self.chat_template, self.chat_template_kwargs)
        generation = getattr(self.module, "generation_config", None)
        self.stop_ids = stop_token_ids(self.tokenizer, getattr(generation, "eos_token_id", None))
        self.ignored_generation_config = neutral_generation_config(self.module)

    def _autocast(self) -> contextlib.AbstractContextManager:
        cuda = next(self.module.parameters()).device.type == "cuda"
        return torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()

    def render(self, prompt: Any) -> str:
        """The prompt as the model reads it: through its chat template (workers.models.prompts)."""
        return self.encoder.render(prompt)

    def sample(self, prompts: Sequence[Prompt], *, max_new_tokens: int, temperature: float, group_size: int = 1) -> Rollout:
        was_training = self.module.training
        self.module.eval()
        try:
            with self._autocast():
                return generate(
                    self.module,
                    self.tokenizer,
                    self.encoder.encode(prompts),
                    stop_ids=self.stop_ids,
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    group_size=group_size,
                )
        finally:
            self.module.train(was_training)

    def logprobs(self, rollout: Rollout, temperature: float) -> torch.Tensor:
        with self._autocast():
            return completion_logprobs(self.module, rollout, temperature)

    def logprobs_entropy(self, rollout: Rollout, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
        with self._autocast():
            return completion_logprobs_entropy(self.module, rollout, temperature)

    def answer_probability(
        self, prompts: Sequence[Prompt], answers: list[str], *, max_new_tokens: int, temperature: float
    ) -> torch.Tensor:
        with self._autocast():
            logp = sequence_logprob(
                self.module,
                self.tokenizer,
                self.encoder.encode(prompts),
                answers,
                stop_ids=self.stop_ids,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
            )
        return torch.exp(logp)


def token_settings(tokenizer: PreTrainedTokenizerBase) -> dict[str, int | None]:
    """The model config's vocabulary size and special token ids, read from its tokenizer."""
    return {
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }


def supervised_batch(
    prompts: list[list[int]], answers: list[list[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prompt + answer token ids right-padded to one width, for a supervised warm start (the presets'): (ids, labels:
    -100 but on the answer, attention mask), each (S, width) long."""
    seqs = [p + a for p, a in zip(prompts, answers, strict=True)]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad_id)
    labels = torch.full((len(seqs), width), -100)
    att = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, (p, a, s) in enumerate(zip(prompts, answers, seqs, strict=True)):
        ids[row, : len(s)] = torch.tensor(s)
        labels[row, len(p) : len(s)] = torch.tensor(a)
        att[row, : len(s)] = 1
    return ids, labels, att
