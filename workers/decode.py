"""Sampling tokens from a causal LM with a KV cache: a group's prompt prefilled once, each token by the inverse CDF.

The decode loop runs the model's transformer body and LM head itself (as scoring does, workers.rollout), so that a
group's G copies of one prompt are prefilled once and their cache repeated G times, and each step costs the body's
forward on one new token a row, the head and the draw; ``transformers.generate`` prefills every row and samples by
``torch.multinomial``, which draws an exponential for every token of the vocabulary at every step (on CPU 23 ms a
step at 64 rows x 32k tokens, a fifth of a medium-shape training step; ``draw_tokens`` takes 4 ms).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from workers.models.lora import transformer_body

SAMPLER_BLOCK = 256  # most tokens a block of the two-stage inverse CDF


class NonFiniteLogitsError(FloatingPointError):
    """The policy's logits held NaN or infinity while sampling (a diverged model, bad weights)."""


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(S, T) 0/1 -> (S, T) long positions counting only attended tokens (left padding -> 0)."""
    return (attention_mask.long().cumsum(dim=1) - 1).clamp_min(0)


def embeddings(model: PreTrainedModel, ids: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
    """Input embeddings with padding positions set to 0: a non-finite value in a pad token's embedding (or a
    pad row) then cannot reach a real token through attention (masked weights are 0, but 0 * NaN is NaN)."""
    embeds = model.get_input_embeddings()(ids)
    return torch.where(att.bool().unsqueeze(-1), embeds, torch.zeros((), dtype=embeds.dtype, device=embeds.device))


@lru_cache(maxsize=16)
def cache_kwarg(cls: type) -> str:
    """transformers 5 names the KV-cache argument of a model class's forward ``cache``; earlier versions
    ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def _block_size(vocab: int) -> int:
    """The sampler's block: the largest power of two up to SAMPLER_BLOCK that divides the vocabulary (no copy: 256
    for 32,000 tokens, 128 for Qwen2's 151,936), else SAMPLER_BLOCK with the row padded by zero weights."""
    size = SAMPLER_BLOCK
    while size > 16 and vocab % size:
        size //= 2
    return size if vocab % size == 0 else SAMPLER_BLOCK


def draw_tokens(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """(n, V) logits -> (n,) long: one token a row from softmax(logits / temperature). Overwrites ``logits``.

    By the inverse CDF in two stages, exact up to the float32 rounding of the weights w = exp((l - max) / T) and
    their block sums (_block_size tokens a block): one uniform picks a block by the blocks' cumulative sums
    (float64), a second a token within it by the block's own. P(token k of block b) = (W_b / W)(w_k / W_b) =
    w_k / W, and a token (or block) of weight 0 lies in a flat stretch of its CDF, so it is never drawn. Uses
    torch's global RNG.

    Raises:
        NonFiniteLogitsError: a NaN or +inf logit, or a row of -inf (a -inf logit alone is a token of probability 0).
    """
    n, vocab = logits.shape
    weights = logits.sub_(logits.amax(dim=-1, keepdim=True)).div_(temperature).exp_()
    size = _block_size(vocab)
    blocks = (weights if vocab % size == 0 else F.pad(weights, (0, -vocab % size))).view(n, -1, size)
    cdf = blocks.sum(dim=-1).double().cumsum(dim=-1)  # (n, blocks)
    total = cdf[:, -1:]
    if not (torch.isfinite(total) & (total > 0)).all():
        raise NonFiniteLogitsError("non-finite logits in generation")
    u = torch.rand(n, 2, dtype=torch.float64, device=logits.device)
    block = torch.searchsorted(cdf, u[:, :1] * total, right=True).clamp_(max=blocks.shape[1] - 1)  # (n, 1)
    inner = blocks[torch.arange(n, device=logits.device), block[:, 0]].cumsum(dim=-1, dtype=torch.float64)
    within = torch.searchsorted(inner, u[:, 1:] * inner[:, -1:], right=True).clamp_(max=size - 1)
    return (block * size + within).clamp_(max=vocab - 1)[:, 0]


def prefill(model: PreTrainedModel, ids: torch.Tensor, att: torch.Tensor, g: int) -> tuple[torch.Tensor, Any]:
    """The transformer body over each group's prompt once (rows ``ids[::g]``, ``att[::g]``, left-padded): their
    (S / g, P, H) last hidden states and the KV cache repeated g times, one copy a row (decoding and
    workers.rollout's shared-prefix scoring both start here)."""
    first = transformer_body(model)(
        inputs_embeds=embeddings(model, ids[::g], att[::g]),
        attention_mask=att[::g],
        position_ids=position_ids_from_mask(att[::g]),
        use_cache=True,
    )
    cache = getattr(first, "cache", None) or first.past_key_values
    if g > 1:
        cache.batch_repeat_interleave(g)
    return first.last_hidden_state, cache


def _shared(ids: torch.Tensor, att: torch.Tensor, group_size: int) -> int:
    """``group_size`` when the rows come as that many adjacent copies of each prompt, else 1."""
    n = ids.shape[0]
    if group_size <= 1 or n % group_size:
        return 1
    same = (ids.view(-1, group_size, ids.shape[1]) == ids[::group_size, None]).all()
    return group_size if bool(same and (att.view(-1, group_size, att.shape[1]) == att[::group_size, None]).all()) else 1


@torch.no_grad()
def sample_tokens(
    model: PreTrainedModel,
    ids: torch.Tensor,
    att: torch.Tensor,
    *,
    max_new_tokens: int,
    temperature: float,
    stop_ids: Sequence[int],
    pad_id: int,
    group_size: int = 1,
) -> torch.Tensor:
    """(S, L) tokens sampled after the left-padded prompts ``ids``, ``att`` (S, P): L <= max_new_tokens, the
    longest row's; a row is ``pad_id`` after its first stop id. Rows that come as ``group_size`` adjacent copies of
    a prompt have it prefilled once. Uses torch's global RNG.

    Raises:
        NonFiniteLogitsError: the model's logits held NaN or +inf.
    """
    n, g = ids.shape[0], _shared(ids, att, group_size)
    body, head = transformer_body(model), model.get_output_embeddings()
    last, cache = prefill(model, ids, att, g)
    hidden = last[:, -1].repeat_interleave(g, dim=0)
    stops = torch.as_tensor(list(stop_ids), device=ids.device)
    live = torch.ones(n, dtype=torch.bool, device=ids.device)
    tokens: list[torch.Tensor] = []
    while True:
        token = torch.where(live, draw_tokens(head(hidden).float(), temperature), pad_id)
        tokens.append(token)
        live &= ~torch.isin(token, stops)
        if len(tokens) == max_new_tokens or not live.any():
            return torch.stack(tokens, dim=1)
        att = torch.cat([att, torch.ones(n, 1, dtype=att.dtype, device=att.device)], dim=1)
        out = body(
            inputs_embeds=embeddings(model, token[:, None], att[:, -1:]),
            attention_mask=att,
            position_ids=att.long().sum(dim=1, keepdim=True) - 1,
            use_cache=True,
            **{cache_kwarg(type(body)): cache},
        )
        hidden = out.last_hidden_state[:, -1]
