"""Rollouts: sampling completions (workers.decode) and scoring them (log-probs).

Prompts arrive as token ids (workers.models.prompts.PromptEncoder) and are left-padded so that
every completion starts at the same column P. A completion ends at the first of the model's stop
ids (generation_config's EOS ids and the tokenizer's EOS); its mask keeps tokens up to and including
that stop, and truncation means none appeared within max_new_tokens. Position ids are computed from
the attention mask, so left padding does not shift positions between generation and scoring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from workers.decode import cache_kwarg, embeddings, position_ids_from_mask, prefill, sample_tokens
from workers.head import head_stats
from workers.models.lora import transformer_body


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

    @staticmethod
    def concat(parts: list[Rollout], group_size: int = 1) -> Rollout:
        """One rollout of several (generation in chunks): prompts left-padded to the widest, completions
        right-padded to the longest (pad positions are masked; their ids are 0 and never read)."""
        if len(parts) == 1:
            return replace(parts[0], group_size=group_size)
        p = max(r.prompt_len for r in parts)
        length = max(r.completion_mask.shape[1] for r in parts)

        widths = [(p - r.prompt_len, length - r.completion_mask.shape[1]) for r in parts]
        ids = torch.cat([torch.nn.functional.pad(r.input_ids, w) for r, w in zip(parts, widths)])
        att = torch.cat([torch.nn.functional.pad(r.attention_mask, w) for r, w in zip(parts, widths)])
        cmask = torch.cat([torch.nn.functional.pad(r.completion_mask, (0, w[1])) for r, w in zip(parts, widths)])
        return Rollout(
            ids, att, cmask, p, [t for r in parts for t in r.texts], torch.cat([r.truncated for r in parts]), group_size
        )

    @property
    def completion_ids(self) -> torch.Tensor:
        """(S, L) long."""
        return self.input_ids[:, self.prompt_len :]

    def rows(self, sl: slice) -> Rollout:
        """Completions sl.start .. sl.stop - 1 (a micro-batch), keeping groups shared where sl holds whole groups."""
        start, stop = sl.start or 0, min(sl.stop, self.input_ids.shape[0])
        g = self.group_size if start % self.group_size == 0 and (stop - start) % self.group_size == 0 else 1
        return Rollout(
            self.input_ids[start:stop],
            self.attention_mask[start:stop],
            self.completion_mask[start:stop],
            self.prompt_len,
            self.texts[start:stop],
            self.truncated[start:stop],
            g,
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


# generation_config fields generate() may keep: ids, and what says nothing about the sampling distribution.
_NEUTRAL_GENERATION_FIELDS = frozenset(
    {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "transformers_version", "_from_model_config"}
)


def neutral_generation_config(model: PreTrainedModel) -> dict[str, object]:
    """Replace the model's generation_config by one with its token ids alone, and return what was dropped.

    A model folder's generation_config.json may set sampling fields (Qwen2.5-Instruct ships
    ``repetition_penalty``, ``top_k``, ``top_p``, ``temperature``). groupscale's own decode loop
    (workers.decode) reads none of it, but ``transformers.generate`` (TRL's trainer samples with it) fills every
    field its caller leaves at the default from it, so the completions would come from another distribution than
    the one the trainer scores and the probe measures. Sampling follows the spec alone.

    Returns:
        field -> value of each non-default field that was not kept (for the trial's MLflow run).
    """
    current = getattr(model, "generation_config", None)
    if current is None:
        return {}
    ignored = {k: v for k, v in current.to_diff_dict().items() if k not in _NEUTRAL_GENERATION_FIELDS}
    model.generation_config = GenerationConfig(
        **{k: getattr(current, k, None) for k in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")}
    )
    return ignored


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

    Sampling is pure softmax(logits / temperature) (workers.decode.sample_tokens): no top-k, top-p or penalty, so
    that the log-probs used in the loss are those of the sampling policy. Generation of a row stops at any
    of ``stop_ids``. Uses torch's global RNG.

    Args:
        prompt_ids: S token-id lists (PromptEncoder.encode).
        stop_ids: the model's stop ids (workers.models.prompts.stop_token_ids).
        max_new_tokens: completion length cap L_max (tokens).
        temperature: > 0.
        group_size: G when prompts come as G adjacent copies of each (sampling and scoring then share the prompt).
    Returns:
        Rollout with L <= max_new_tokens columns of completion.
    """
    device = next(model.parameters()).device
    ids, att = left_pad(prompt_ids, tokenizer.pad_token_id, device)
    completion = sample_tokens(
        model,
        ids,
        att,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        stop_ids=stop_ids,
        pad_id=tokenizer.pad_token_id,
        group_size=group_size,
    )
    prompt_len = ids.shape[1]
    out = torch.cat([ids, completion], dim=1)
    cmask = completion_mask_from_stops(completion, stop_ids)
    is_stop = torch.isin(completion, torch.as_tensor(list(stop_ids), device=completion.device))
    truncated = ~is_stop.any(dim=1)
    attention = torch.cat([att, cmask.long()], dim=1)
    # The text before the first stop; the stop itself and other special tokens are not text.
    text = cmask.bool() & ~is_stop
    texts = tokenizer.batch_decode(torch.where(text, completion, tokenizer.pad_token_id), skip_special_tokens=True)
    return Rollout(out, attention, cmask, prompt_len, texts, truncated.cpu(), group_size)


def _completion_hidden(model: PreTrainedModel, rollout: Rollout) -> torch.Tensor:
    """(S, L, H) last hidden states at the positions whose next token is a completion token."""
    ids, att = rollout.input_ids, rollout.attention_mask
    p, g = rollout.prompt_len, rollout.group_size
    body = transformer_body(model)
    if g > 1 and p > 0 and not getattr(model, "is_gradient_checkpointing", False):
        return _shared_prefix_hidden(body, model, ids, att, p, g)
    out = body(inputs_embeds=embeddings(model, ids, att), attention_mask=att, position_ids=position_ids_from_mask(att))
    return out.last_hidden_state[:, p - 1 : -1]


def _shared_prefix_hidden(
    body: torch.nn.Module, model: PreTrainedModel, ids: torch.Tensor, att: torch.Tensor, p: int, g: int
) -> torch.Tensor:
    """Hidden states at the completion positions, running each group's prompt once instead of G times.

    The G completions of a prompt share its P prompt tokens: their keys and values are computed
    for the N = S/G distinct prompts, repeated G times, and the completions attend to them. Exact
    (the same values; gradients of the shared prompt add up over the group), and the forward and
    backward passes see N*P + S*L tokens instead of S*(P+L).
    Returns (S, L, H).
    """
    last, cache = prefill(model, ids[:, :p], att[:, :p], g)
    hidden = [last[:, -1:].repeat_interleave(g, dim=0)]  # predicts completion token 1
    if ids.shape[1] - p > 1:
        positions = position_ids_from_mask(att)[:, p:-1]
        rest = body(
            inputs_embeds=embeddings(model, ids[:, p:-1], att[:, p:-1]),
            attention_mask=att[:, :-1],
            position_ids=positions,
            use_cache=False,
            **{cache_kwarg(type(body)): cache},
        )
        hidden.append(rest.last_hidden_state)
    return torch.cat(hidden, dim=1)


def _score(
    model: PreTrainedModel, rollout: Rollout, temperature: float, stop_ids: Sequence[int] | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(S, L) log-probs of the completion tokens, entropies and log P(stop) at every completion position."""
    hidden = _completion_hidden(model, rollout)
    stops = None if stop_ids is None else torch.as_tensor(list(stop_ids), device=hidden.device)
    return head_stats(model.get_output_embeddings(), hidden, rollout.completion_ids, temperature, stops)


def completion_logprobs(model: PreTrainedModel, rollout: Rollout, temperature: float) -> torch.Tensor:
    """Log-probs of the sampled completion tokens, logits scaled by 1/temperature (as sampled).

    Returns:
        (S, L) float32; values off the completion mask are meaningless (mask them).
    """
    return _score(model, rollout, temperature)[0]


def completion_logprobs_entropy(
    model: PreTrainedModel, rollout: Rollout, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Like completion_logprobs, plus the per-token entropy of the sampling distribution (nats), both (S, L)."""
    return _score(model, rollout, temperature)[:2]


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
    rollout = Rollout(
        torch.cat([enc_ids, target], 1),
        torch.cat([enc_att, tmask.long()], 1),
        tmask,
        enc_ids.shape[1],
        list(targets),
        torch.zeros(len(rows), dtype=torch.bool),
    )
    token, _, any_stop = _score(model, rollout, temperature, stops)  # any_stop: log P(some stop id) at each position
    logp = (torch.where(last.bool(), any_stop, token) * tmask).sum(dim=1)
    fit = torch.tensor(fits, device=device)
    return torch.where(fit, logp, torch.full_like(logp, -torch.inf))
