"""Rollouts: sampling completions with ``model.generate`` and scoring them (log-probs).

Prompts arrive as token ids (workers.models.prompts.PromptEncoder) and are left-padded so that
every completion starts at the same column P. A completion ends at the first of the model's stop
ids (generation_config's EOS ids and the tokenizer's EOS); its mask keeps tokens up to and including
that stop, and truncation means none appeared within max_new_tokens. Position ids are computed from
the attention mask, so left padding does not shift positions between generation and scoring.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase


@dataclass
class Rollout:
    """A batch of S sampled completions.

    Attributes:
        input_ids: (S, P + L) long, left-padded prompt followed by the completion.
        attention_mask: (S, P + L) long, 1 on prompt tokens and on masked completion tokens.
        completion_mask: (S, L) float32, 1 up to and including the first EOS.
        prompt_len: P, columns taken by the padded prompt.
        texts: S decoded completions (text before the first EOS, special tokens removed).
        truncated: (S,) bool, True where no EOS appeared within max_new_tokens.
        group_size: G when rows come in groups of G completions of one prompt (rows gG..gG+G-1), else 1.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor
    prompt_len: int
    texts: list[str]
    truncated: torch.Tensor
    group_size: int = 1

    @property
    def completion_ids(self) -> torch.Tensor:
        """(S, L) long."""
        return self.input_ids[:, self.prompt_len :]

    def slice(self, i: int) -> Rollout:
        """Completion i alone, as a batch of one."""
        return Rollout(
            self.input_ids[i : i + 1],
            self.attention_mask[i : i + 1],
            self.completion_mask[i : i + 1],
            self.prompt_len,
            self.texts[i : i + 1],
            self.truncated[i : i + 1],
        )


def completion_mask_from_stops(completion_ids: torch.Tensor, stop_ids: int | Sequence[int]) -> torch.Tensor:
    """(S, L) long -> (S, L) float32 mask, 1 on tokens up to and including the first stop id."""
    is_stop = torch.isin(completion_ids, torch.as_tensor(list(_ids(stop_ids)), device=completion_ids.device))
    # Count stops seen strictly before each position; a token is kept while that count is 0.
    before = torch.cumsum(is_stop.long(), dim=1) - is_stop.long()
    return (before == 0).float()


def _ids(stop_ids: int | Sequence[int]) -> tuple[int, ...]:
    return (stop_ids,) if isinstance(stop_ids, int) else tuple(stop_ids)


def left_pad(
    prompt_ids: Sequence[Sequence[int]], pad_token_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(S,) token-id lists -> (S, P) long input ids and (S, P) long attention mask, padded on the left."""
    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad_token_id, dtype=torch.long)
    att = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for i, p in enumerate(prompt_ids):
        if p:
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            att[i, width - len(p) :] = 1
    return ids.to(device), att.to(device)


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(S, T) 0/1 -> (S, T) long positions counting only attended tokens (left padding -> 0)."""
    return (attention_mask.long().cumsum(dim=1) - 1).clamp_min(0)


@lru_cache(maxsize=64)
def _sampling_config(max_new_tokens: int, temperature: float, pad_token_id: int, stop_ids: tuple[int, ...]) -> GenerationConfig:
    """Plain ancestral sampling (no top-k/top-p), built once per setting (validation is not free)."""
    return GenerationConfig(do_sample=True, temperature=temperature, top_k=0, top_p=1.0, max_new_tokens=max_new_tokens,
                            pad_token_id=pad_token_id, eos_token_id=list(stop_ids))  # fmt: skip


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompt_ids: Sequence[Sequence[int]],
    *,
    stop_ids: Sequence[int],
    max_new_tokens: int,
    temperature: float,
    group_size: int = 1,
) -> Rollout:
    """Sample one completion per prompt (repeat prompts G times for a group) with plain sampling.

    Sampling is pure softmax(logits / temperature): top_k and top_p are disabled so that the
    log-probs used in the loss are those of the sampling policy. Generation of a row stops at any
    of ``stop_ids``. Uses torch's global RNG.

    Args:
        prompt_ids: S token-id lists (PromptEncoder.encode).
        stop_ids: the model's stop ids (workers.models.prompts.stop_token_ids).
        max_new_tokens: completion length cap L_max (tokens).
        temperature: > 0.
        group_size: G when prompts come as G adjacent copies of each (lets scoring share the prompt).
    Returns:
        Rollout with L <= max_new_tokens columns of completion.
    """
    device = next(model.parameters()).device
    ids, att = left_pad(prompt_ids, tokenizer.pad_token_id, device)
    config = _sampling_config(max_new_tokens, temperature, tokenizer.pad_token_id, tuple(stop_ids))
    out = model.generate(input_ids=ids, attention_mask=att, generation_config=config)
    prompt_len = ids.shape[1]
    completion = out[:, prompt_len:]
    cmask = completion_mask_from_stops(completion, stop_ids)
    is_stop = torch.isin(completion, torch.as_tensor(list(stop_ids), device=completion.device))
    truncated = ~is_stop.any(dim=1)
    attention = torch.cat([att, cmask.long()], dim=1)
    # The text before the first stop; the stop itself and other special tokens are not text.
    text = cmask.bool() & ~is_stop
    texts = tokenizer.batch_decode(torch.where(text, completion, tokenizer.pad_token_id), skip_special_tokens=True)
    return Rollout(out, attention, cmask, prompt_len, texts, truncated.cpu(), group_size)


def _completion_log_softmax(model: PreTrainedModel, rollout: Rollout, temperature: float) -> torch.Tensor:
    """(S, L, V) float32 log-softmax of logits / temperature at the completion positions."""
    ids, att = rollout.input_ids, rollout.attention_mask
    p, g = rollout.prompt_len, rollout.group_size
    if g > 1 and p > 0:
        logits = _shared_prefix_logits(model, ids, att, p, g)
    else:
        # Only the L + 1 last positions need logits (the LM head over a large vocabulary is costly).
        logits = model(input_ids=ids, attention_mask=att, position_ids=position_ids_from_mask(att),
                       logits_to_keep=ids.shape[1] - p + 1).logits[:, :-1]  # fmt: skip
    return torch.log_softmax(logits.float() / temperature, dim=-1)


def _shared_prefix_logits(model: PreTrainedModel, ids: torch.Tensor, att: torch.Tensor, p: int, g: int) -> torch.Tensor:
    """Logits at the completion positions, running each group's prompt once instead of G times.

    The G completions of a prompt share its P prompt tokens: their keys and values are computed
    for the N = S/G distinct prompts, repeated G times, and the completions attend to them. Exact
    (the same values; gradients of the shared prompt add up over the group), and the forward and
    backward passes see N*P + S*L tokens instead of S*(P+L).
    Returns (S, L, V).
    """
    prompt_att = att[::g, :p]
    first = model(input_ids=ids[::g, :p], attention_mask=prompt_att, position_ids=position_ids_from_mask(prompt_att),
                  use_cache=True, logits_to_keep=1)  # fmt: skip
    logits = [first.logits[:, -1:].repeat_interleave(g, dim=0)]  # predicts completion token 1
    if ids.shape[1] - p > 1:
        cache = getattr(first, "cache", None) or first.past_key_values
        cache.batch_repeat_interleave(g)
        rest = model(input_ids=ids[:, p:-1], attention_mask=att[:, :-1], position_ids=position_ids_from_mask(att)[:, p:-1],
                     use_cache=False, **{_cache_kwarg(model): cache})  # fmt: skip
        logits.append(rest.logits)
    return torch.cat(logits, dim=1)


@lru_cache(maxsize=16)
def _cache_kwarg_of(cls: type) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def _cache_kwarg(model: PreTrainedModel) -> str:
    """transformers 5 names the KV-cache argument ``cache``; earlier versions ``past_key_values``."""
    return _cache_kwarg_of(type(model))


def completion_logprobs(model: PreTrainedModel, rollout: Rollout, temperature: float) -> torch.Tensor:
    """Log-probs of the sampled completion tokens, logits scaled by 1/temperature (as sampled).

    Returns:
        (S, L) float32; values off the completion mask are meaningless (mask them).
    """
    logp_all = _completion_log_softmax(model, rollout, temperature)
    return logp_all.gather(-1, rollout.completion_ids.unsqueeze(-1)).squeeze(-1)


def completion_logprobs_entropy(
    model: PreTrainedModel, rollout: Rollout, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Like completion_logprobs, plus the per-token entropy of the sampling distribution (nats), both (S, L)."""
    logp_all = _completion_log_softmax(model, rollout, temperature)
    logp = logp_all.gather(-1, rollout.completion_ids.unsqueeze(-1)).squeeze(-1)
    return logp, -(logp_all.exp() * logp_all).sum(dim=-1)


def sequence_logprob(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompt_ids: Sequence[Sequence[int]],
    targets: list[str],
    *,
    stop_ids: Sequence[int],
    max_new_tokens: int,
    temperature: float,
) -> torch.Tensor:
    """Log-probability that sampling (as in ``generate``) returns exactly ``target`` for each prompt.

    A completion decodes to the target when it is the target's tokens followed by any stop id, or
    the target's tokens alone when they fill max_new_tokens (truncation). Teacher forcing gives this
    probability exactly: log P(target tokens) + log sum_{s in stops} P(s | target). So an expected
    exact-match accuracy has no Monte Carlo noise. Differentiable (wrap in torch.no_grad() to evaluate only).

    Returns:
        (S,) float32 log-probabilities (-inf where the target does not fit in max_new_tokens).
    """
    device = next(model.parameters()).device
    stops = list(stop_ids)
    rows, fits, ends = [], [], []
    for t in targets:
        ids = tokenizer(t, add_special_tokens=False)["input_ids"]
        fits.append(len(ids) <= max_new_tokens)
        ends.append(len(ids) < max_new_tokens)  # a stop must follow
        rows.append(ids + [stops[0]] if len(ids) < max_new_tokens else ids[:max_new_tokens])
    enc_ids, enc_att = left_pad(prompt_ids, tokenizer.pad_token_id, device)
    width = max(len(r) for r in rows)
    target = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long, device=device)
    tmask = torch.zeros((len(rows), width), dtype=torch.float32, device=device)
    last = torch.zeros((len(rows), width), dtype=torch.float32, device=device)  # 1 at the stop position
    for i, r in enumerate(rows):
        target[i, : len(r)] = torch.tensor(r, device=device)
        tmask[i, : len(r)] = 1.0
        if ends[i]:
            last[i, len(r) - 1] = 1.0
    rollout = Rollout(torch.cat([enc_ids, target], 1), torch.cat([enc_att, tmask.long()], 1), tmask, enc_ids.shape[1],
                      list(targets), torch.zeros(len(rows), dtype=torch.bool))  # fmt: skip
    logp_all = _completion_log_softmax(model, rollout, temperature)
    token = logp_all.gather(-1, rollout.completion_ids.unsqueeze(-1)).squeeze(-1)
    any_stop = torch.logsumexp(logp_all[..., stops], dim=-1)  # log P(some stop id) at each position
    logp = (torch.where(last.bool(), any_stop, token) * tmask).sum(dim=1)
    fit = torch.tensor(fits, device=device)
    return torch.where(fit, logp, torch.full_like(logp, -torch.inf))
