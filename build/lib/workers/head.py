"""An LM head's per-position statistics (sampled-token log-prob, entropy, log P(stop)) without (S, L, V) tensors.

At a real vocabulary the float32 logits of one step do not fit (152k x 64 x 512 x 4 B = 20 GB before
``exp`` doubles it). ``head_stats`` runs the head over about ``chunk_elements`` logits at a time. For a
plain ``nn.Linear`` head a custom autograd function (``_HeadStats``) saves only the chunk's hidden
states and recomputes its logits in the backward pass, forming their gradient in place, so at most two
(K, V) float32 buffers exist at once, forward or backward; other heads (a wrapped or hooked module) go
through activation checkpointing of the plain computation (``reference_stats``), which is exact too
but holds about seven such buffers in its backward pass.

For one position with logits l = (h W^T + b) / T over the vocabulary, log Z = logsumexp(l) and
p = softmax(l), the statistics and their derivatives with respect to l are

    log-prob of target y   lp = l_y - log Z               d lp / d l = e_y - p
    entropy (nats)         H  = -sum_j p_j log p_j        d H  / d l = -p * (log p + H)
    log P(stop set S)      st = logsumexp(l_S) - log Z    d st / d l = q 1_S - p,  q_j = exp(l_j - logsumexp(l_S))

(the entropy's: d H / d l_k = -sum_j (d p_j / d l_k)(log p_j + 1) = -p_k (log p_k + H)), so the
gradient reaching l is -p * (g_lp + g_st + g_H (log p + H)) + g_lp e_y + g_st q 1_S, and the head's
gradients follow by the chain rule through the 1 / T and the linear map.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

LOGIT_CHUNK_ELEMENTS = 1 << 24  # logits that exist at once (positions x vocabulary): 64 MiB of float32
Stats = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def reference_stats(
    head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperature: float, stop_ids: torch.Tensor | None
) -> Stats:
    """The plain computation for K positions, differentiated by autograd: log-prob of the target, entropy
    and log P(any stop id) under softmax(head(h) / T).

    hidden (K, H), targets (K,) long, stop_ids (n,) long or None -> three (K,) float32 (float64 for a
    float64 head; the last is zeros without stop_ids).
    """
    logits = _at_least_float32(head(hidden)) / temperature
    logz = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logz
    entropy = logz - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)
    stop = torch.logsumexp(logits[:, stop_ids], dim=-1) - logz if stop_ids is not None else torch.zeros_like(logz)
    return logp, entropy, stop


def _at_least_float32(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype == torch.float64 else x.float()


def _logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float) -> torch.Tensor:
    """(K, V) logits / T, float32 (float64 for a float64 head), in a fresh buffer that the caller may overwrite."""
    return _at_least_float32(F.linear(hidden, weight, bias)).div_(temperature)


class _HeadStats(torch.autograd.Function):
    """reference_stats for a linear head, saving (K, H) instead of (K, V) tensors (module docstring)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, stop_ids):
        logp = _logits(hidden, weight, bias, temperature)
        logz = torch.logsumexp(logp, dim=-1)
        lp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logz
        stop = torch.logsumexp(logp[:, stop_ids], dim=-1) - logz if stop_ids is not None else torch.zeros_like(logz)
        logp.sub_(logz.unsqueeze(-1))  # log p, in place
        entropy = -(logp.exp().mul_(logp)).sum(dim=-1)
        ctx.save_for_backward(hidden, weight, bias, targets, stop_ids, logz, entropy, stop)
        ctx.temperature = temperature
        return lp, entropy, stop

    @staticmethod
    def backward(ctx, g_lp, g_h, g_st):
        hidden, weight, bias, targets, stop_ids, logz, entropy, stop = ctx.saved_tensors
        if stop_ids is None:
            g_st = torch.zeros_like(g_lp)
        logp = _logits(hidden, weight, bias, ctx.temperature).sub_(logz.unsqueeze(-1))
        p = logp.exp()
        grad = logp.add_(entropy.unsqueeze(-1)).mul_(g_h.unsqueeze(-1)).add_((g_lp + g_st).unsqueeze(-1)).mul_(p).neg_()
        grad.scatter_add_(1, targets.unsqueeze(-1), g_lp.unsqueeze(-1))
        if stop_ids is not None:
            grad.index_add_(1, stop_ids, p[:, stop_ids] * (g_st * torch.exp(-stop)).unsqueeze(-1))
        del p
        grad = grad.div_(ctx.temperature).to(hidden.dtype)
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        return (
            grad @ weight if need_h else None,
            grad.T @ hidden if need_w else None,
            grad.sum(dim=0) if need_b and bias is not None else None,
            None,
            None,
            None,
        )


def head_stats(
    head: torch.nn.Module,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
    stop_ids: torch.Tensor | None = None,
    chunk_elements: int = LOGIT_CHUNK_ELEMENTS,
) -> Stats:
    """reference_stats over (S, L) positions, about ``chunk_elements`` logits at a time; no (S, L, V) tensor
    exists, forward or backward. Values equal reference_stats' within float32 rounding, and so do the
    gradients with respect to ``hidden`` and the head's parameters.

    hidden (S, L, H), targets (S, L) long, stop_ids (n,) long or None -> three (S, L) float32.
    """
    s, length, h = hidden.shape
    step = max(1, chunk_elements // head.weight.shape[0])
    # split, not slicing: the backward of a slice writes its gradient into a zero tensor of the whole input
    parts_h, parts_t = hidden.reshape(s * length, h).split(step), targets.reshape(s * length).split(step)
    plain = type(head) is torch.nn.Linear and not (head._forward_hooks or head._forward_pre_hooks)
    grad = torch.is_grad_enabled() and (hidden.requires_grad or head.weight.requires_grad)
    parts = []
    for hid, tgt in zip(parts_h, parts_t):
        if plain:
            parts.append(_HeadStats.apply(hid, head.weight, head.bias, tgt, temperature, stop_ids))
        elif grad:
            parts.append(checkpoint(reference_stats, head, hid, tgt, temperature, stop_ids, use_reentrant=False))
        else:
            parts.append(reference_stats(head, hid, tgt, temperature, stop_ids))
    return tuple(torch.cat([part[k] for part in parts]).reshape(s, length) for k in range(3))  # type: ignore[return-value]
