"""Prompts to token ids, once, the way the model was trained to read them; and the model's stop ids.

One ``PromptEncoder`` serves generation, scoring and evaluation, so the PPO ratio is computed on
the prefix that was sampled. A conversational prompt (a list of ``{role, content}`` messages) is
rendered with the tokenizer's chat template and ``add_generation_prompt=True`` (TRL's
``maybe_apply_chat_template``); a string prompt is used as it is (TRL's standard format). Either
way the text is tokenized exactly once with the model's own special tokens: one BOS where the
tokenizer adds one, never two (a template that writes the BOS itself gets none added).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

Prompt = str | list[dict[str, Any]]


def stop_token_ids(tokenizer: PreTrainedTokenizerBase, generation_eos: int | Sequence[int] | None) -> tuple[int, ...]:
    """The model's stop ids: ``generation_config.eos_token_id`` (an int or a list) and the tokenizer's EOS.

    Raises:
        ValueError: neither gives a stop id (generation could never end before max_new_tokens).
    """
    ids = [generation_eos] if isinstance(generation_eos, int) else list(generation_eos or [])
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    stops = tuple(dict.fromkeys(int(i) for i in ids))
    if not stops:
        raise ValueError("the model has no stop token: neither generation_config.eos_token_id nor tokenizer.eos_token")
    return stops


def _adds_bos(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the tokenizer puts its BOS in front of a text it encodes with special tokens."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return False
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    return bool(with_special) and with_special[0] == bos and tokenizer("a", add_special_tokens=False)["input_ids"][:1] != [bos]


@dataclass
class PromptEncoder:
    """Renders and tokenizes prompts for one tokenizer.

    Attributes:
        chat_template: render conversational prompts with the tokenizer's chat template; False
            (``model.chat_template: false``) joins the messages' contents with newlines instead.
        template_kwargs: extra variables of the template (``model.chat_template_kwargs``, TRL's
            ``chat_template_kwargs``: ``{enable_thinking: false}`` for Qwen3-style templates).
    """

    tokenizer: PreTrainedTokenizerBase
    chat_template: bool = True
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    _bos: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._bos = [self.tokenizer.bos_token_id] if _adds_bos(self.tokenizer) else []

    @property
    def uses_template(self) -> bool:
        return self.chat_template and getattr(self.tokenizer, "chat_template", None) is not None

    def render(self, prompt: Prompt) -> str:
        """The prompt as the model reads it (before tokenization)."""
        if isinstance(prompt, str):
            return prompt
        if self.uses_template:
            return self.tokenizer.apply_chat_template(
                list(prompt), add_generation_prompt=True, tokenize=False, **self.template_kwargs
            )
        return "\n".join(str(m["content"]) for m in prompt)

    def encode(self, prompts: Sequence[Prompt]) -> list[list[int]]:
        """Token ids of each prompt: (S,) lists, BOS once where the tokenizer adds one. Each distinct text is
        tokenized once, all of them in one batch call (a group's G copies are one text)."""
        texts = [self.render(p) for p in prompts]
        distinct = list(dict.fromkeys(texts))
        encoded = {}
        for text, ids in zip(distinct, self.tokenizer(distinct, add_special_tokens=False)["input_ids"], strict=True):
            if self._bos and ids[:1] != self._bos:  # the template did not write the BOS itself
                ids = self._bos + ids
            encoded[text] = ids
        return [list(encoded[t]) for t in texts]
