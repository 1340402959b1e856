"""GRPO maths as pure functions: advantages, the clipped policy loss and its aggregation.

Tensors in, tensors out; no model, Ray or MLflow here. Variants are chosen by name from the
registries below (verl's core_algos style); an unknown name raises ValueError listing the valid ones.

Sources:
- GRPO: Shao et al., "DeepSeekMath", arXiv 2402.03300 (2024), eq. 3 (clipped objective, mean/std
  group advantage, per-sequence token mean).
- RLOO / U-statistic form: Zhou et al., arXiv 2603.01162 (2026); THEORY.md "Estimators".
- Dr. GRPO: Liu et al., "Understanding R1-Zero-Like Training", arXiv 2503.20783 (2025): no std
  scaling, token sum normalised by a constant.
- PPO clip: Schulman et al., arXiv 1707.06347 (2017), eq. 7.
- GSPO: Zheng et al., "Group Sequence Policy Optimization", arXiv 2507.18071 (2025), s_i(theta).
- NeMo-RL's advantage: github.com/NVIDIA-NeMo/RL, nemo_rl/algorithms/utils.py and advantage_estimator.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

import torch

STD_FLOOR = 1e-4  # times the reward range (1 for rewards in [0, 1]); below it a group has no signal


def _check_groups(rewards: torch.Tensor) -> None:
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be (N, G) with G >= 2, got shape {tuple(rewards.shape)}")


def compute_loo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Leave-one-out (RLOO) advantage: A_i = r_i - mean of the other G-1 rewards.

    The batch gradient (1/G) sum_i A_i s_i is the order-2 U-statistic with kernel
    h(z, z') = (r - r')(s - s')/2 (arXiv 2603.01162; THEORY.md).

    Args:
        rewards: (N, G) float, one row per prompt.
    Returns:
        (N, G) float advantages; exactly 0 for a group with equal rewards.
    """
    _check_groups(rewards)
    g = rewards.shape[1]
    return (rewards - rewards.mean(dim=1, keepdim=True)) * (g / (g - 1))


def compute_mean_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Group-mean baseline without std scaling (Dr. GRPO): A_i = r_i - mean(r) = ((G-1)/G) loo.

    Args:
        rewards: (N, G) float.
    Returns:
        (N, G) float.
    """
    _check_groups(rewards)
    return rewards - rewards.mean(dim=1, keepdim=True)


def compute_mean_std_advantages(rewards: torch.Tensor, reward_range: float = 1.0) -> torch.Tensor:
    """Original GRPO: A_i = (r_i - mean(r)) / std(r) (DeepSeekMath eq. 3 with outcome rewards).

    The std is the two-pass sample std (ddof=1). Groups whose std is below
    STD_FLOOR * reward_range (equal rewards, also equal up to rounding) get advantage 0 rather
    than noise amplified by a tiny divisor, so the result is never NaN or inf.

    Args:
        rewards: (N, G) float.
        reward_range: max reward - min reward of the task (sets the floor's scale).
    Returns:
        (N, G) float.
    """
    _check_groups(rewards)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    std = torch.sqrt((centred**2).sum(dim=1, keepdim=True) / (rewards.shape[1] - 1))
    floor = STD_FLOOR * reward_range
    return torch.where(std > floor, centred / std.clamp_min(floor), torch.zeros_like(centred))


def compute_oracle_advantages(rewards: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Oracle baseline: A_i = r_i - V(x) with the true value V(x) = E[r | x] (THEORY.md, `oracle`).

    GRPO's loo gradient is asymptotically equivalent to this oracle (arXiv 2603.01162); its
    excess variance is kappa / (G (G - 1)) per prompt.

    Args:
        rewards: (N, G) float.
        values: (N,) float, V(x) of each prompt under the current policy.
    Returns:
        (N, G) float.
    """
    _check_groups(rewards)
    if values.shape != rewards.shape[:1]:
        raise ValueError(f"values must be (N,) = ({rewards.shape[0]},), got {tuple(values.shape)}")
    return rewards - values.to(rewards.dtype).unsqueeze(1)


NEMO_RL_EPS = 1e-6  # NeMo-RL's epsilon added to a nonzero std (GRPOAdvantageEstimator.compute_advantage)


def compute_loo_std_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """NeMo-RL's default GRPO advantage (grpo.normalize_rewards and grpo.use_leave_one_out_baseline both true):
    A_i = (r_i - b_i) / (s_i + 1e-6) with b_i the mean and s_i the sample std (ddof 1) of the G-1 other rewards;
    A_i = r_i - b_i where s_i is 0 (always at G = 2: one other reward has no sample std).

    Source: NVIDIA-NeMo/RL at commit 7ea279abfbeb698b092856d0dab61e7cf39bc909, nemo_rl/algorithms/utils.py
    ``calculate_baseline_and_std_per_prompt`` (leave_one_out_baseline=True: sums over the others by the matrix
    1 - I, s_i = sqrt((mean of squares - b_i^2) (G-1)/(G-2)), NaN (a negative rounding residue, or 0 x inf at G = 2)
    set to 0) and nemo_rl/algorithms/advantage_estimator.py ``GRPOAdvantageEstimator.compute_advantage`` (divides
    where std > 0 by std + 1e-6). Not a U-statistic: the law of THEORY.md is derived for ``loo``.

    Args:
        rewards: (N, G) float.
    Returns:
        (N, G) float.
    """
    _check_groups(rewards)
    g = rewards.shape[1]
    others = 1 - torch.eye(g, dtype=rewards.dtype, device=rewards.device)  # row i sums the rewards but r_i
    baseline = rewards @ others / (g - 1)
    square = rewards.square() @ others / (g - 1)
    scale = torch.tensor((g - 1) / (g - 2) if g > 2 else math.inf, dtype=rewards.dtype)  # NeMo-RL: n / (n - 1)
    std = ((square - baseline.square()) * scale).sqrt().nan_to_num(0)
    centred = rewards - baseline
    return torch.where(std > 0, centred / (std + NEMO_RL_EPS), centred)


ADVANTAGES: dict[str, Callable[..., torch.Tensor]] = {
    "loo": compute_loo_advantages,
    "mean": compute_mean_advantages,
    "mean_std": compute_mean_std_advantages,
    "oracle": compute_oracle_advantages,
    "loo_std": compute_loo_std_advantages,
}
NEEDS_VALUES = frozenset({"oracle"})


def compute_advantages(rewards: torch.Tensor, estimator: str, values: torch.Tensor | None = None) -> torch.Tensor:
    """Dispatch to ADVANTAGES[estimator]. rewards: (N, G) -> (N, G); values: (N,) for ``oracle``.

    Raises:
        ValueError: unknown estimator (lists the valid names), bad shape, or oracle without values.
    """
    if estimator not in ADVANTAGES:
        raise ValueError(f"unknown advantage estimator {estimator!r}; valid: {', '.join(ADVANTAGES)}")
    if estimator in NEEDS_VALUES:
        if values is None:
            raise ValueError(f"the {estimator!r} advantage needs the true values V(x)")
        return ADVANTAGES[estimator](rewards, values)
    return ADVANTAGES[estimator](rewards)


def per_prompt_advantages(
    rewards: torch.Tensor, sizes: list[int], estimator: str, values: torch.Tensor | None = None
) -> torch.Tensor:
    """Advantages of groups of different sizes, each weighted so that every prompt counts 1/N (THEORY.md "Per-prompt
    G": a mean over the S completions would weight prompt x by G_x / (N m)).

    Args:
        rewards: (S,) the groups' rewards in order, group x holding ``sizes[x]`` rows (S = sum of sizes).
        sizes: (N,) each group's G_x (>= 2).
        estimator, values: as compute_advantages (values: (N,) for oracle).
    Returns:
        (S,) each group's advantages (compute_advantages on its own G) times m / G_x, m = S / N.
    Raises:
        ValueError: the sizes do not sum to S; as compute_advantages.
    """
    bounds = [0, *accumulate(sizes)]
    if bounds[-1] != rewards.shape[0]:
        raise ValueError(f"the groups' sizes sum to {bounds[-1]}, the rewards are {rewards.shape[0]}")
    out = torch.empty_like(rewards)
    mean_size = rewards.shape[0] / len(sizes)
    for g in sorted(set(sizes)):  # groups of one size together: (n_g, g)
        which = [i for i, s in enumerate(sizes) if s == g]
        rows = torch.cat([torch.arange(bounds[i], bounds[i + 1]) for i in which])
        adv = compute_advantages(rewards[rows].view(len(which), g), estimator, None if values is None else values[which])
        out[rows] = adv.reshape(-1) * (mean_size / g)
    return out


def zero_variance_group_fraction(rewards: torch.Tensor | list[torch.Tensor]) -> float:
    """Share of prompts whose G rewards are all equal (no learning signal). rewards: (N, G), or N groups (G_x,)."""
    if isinstance(rewards, list):
        return sum(float(r.max() - r.min()) <= STD_FLOOR for r in rewards) / max(len(rewards), 1)
    _check_groups(rewards)
    return float((rewards.max(dim=1).values - rewards.min(dim=1).values <= STD_FLOOR).float().mean())


@dataclass(frozen=True)
class PolicyLossStats:
    """Diagnostics of one policy-loss evaluation (fractions of completion tokens)."""

    clip_frac_low: float  # ratio < 1 - eps with A < 0: the clip is active
    clip_frac_high: float  # ratio > 1 + eps_high with A > 0: the clip is active


def compute_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
    clip_eps_high: float | None = None,
) -> tuple[torch.Tensor, PolicyLossStats]:
    """Per-token PPO-clip loss: -min(rho A, clip(rho, 1-eps, 1+eps_high) A) (PPO eq. 7).

    Args:
        logp: (S, L) float log-probs of the sampled completion tokens under the current policy.
        old_logp: (S, L) float log-probs under the sampling policy (detached).
        advantages: (S,) float, one per completion (broadcast over its tokens).
        mask: (S, L) bool/float, 1 on completion tokens (up to and including the first EOS).
        clip_eps, clip_eps_high: clip range; eps_high defaults to eps (DAPO's clip-higher when larger).
    Returns:
        per-token loss (S, L) (zero off the mask) and clip statistics.
    """
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - old_logp)
    adv = advantages.to(logp.device, logp.dtype).unsqueeze(1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + eps_high) * adv
    m = mask.to(logp.dtype)
    loss = -torch.minimum(unclipped, clipped) * m
    with torch.no_grad():
        n = m.sum().clamp_min(1.0)
        low = ((ratio < 1.0 - clip_eps) & (adv < 0)).to(m.dtype) * m
        high = ((ratio > 1.0 + eps_high) & (adv > 0)).to(m.dtype) * m
        stats = PolicyLossStats(float(low.sum() / n), float(high.sum() / n))
    return loss, stats


def _token_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log pi/pi_old per token (PPO, GRPO)."""
    return logp - old_logp


def _sequence_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO's log s_i(theta): the completion's mean token log-ratio (over its mask), the same on each of its tokens."""
    m = mask.to(logp.dtype)
    per_seq = ((logp - old_logp) * m).sum(dim=1, keepdim=True) / m.sum(dim=1, keepdim=True).clamp_min(1.0)
    return per_seq.expand_as(logp)


IMPORTANCE_SAMPLING_LEVELS: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "token": _token_log_ratio,
    "sequence": _sequence_log_ratio,
}


def compute_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """(S, L) log importance weights by IMPORTANCE_SAMPLING_LEVELS[level]; compute_policy_loss(log_ratio, 0, ...)
    then clips and weights exp(log_ratio), which at level sequence is GSPO's s_i(theta) on every token of completion i.

    Sequence level as TRL 1.16 computes it (trl/trainer/grpo_trainer.py, ``_compute_loss``): (log_ratio * mask).sum(-1)
    / mask.sum(-1).clamp(min=1), the gradient flowing through the mean; GSPO (arXiv 2507.18071) eq. for s_i(theta):
    (pi(y_i | x) / pi_old(y_i | x))^(1 / |y_i|). Shapes: logp, old_logp, mask (S, L).
    Raises:
        ValueError: unknown level (lists the valid names).
    """
    if level not in IMPORTANCE_SAMPLING_LEVELS:
        raise ValueError(f"unknown importance_sampling_level {level!r}; valid: {', '.join(IMPORTANCE_SAMPLING_LEVELS)}")
    return IMPORTANCE_SAMPLING_LEVELS[level](logp, old_logp, mask)


def clip_active(
    ratio: torch.Tensor, advantages: torch.Tensor, clip_eps: float, clip_eps_high: float | None = None
) -> torch.Tensor:
    """(S, L) bool: tokens whose PPO-clip term is on the clipped branch, so their gradient is zero.

    ratio: (S, L); advantages: (S,).
    """
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    adv = advantages.to(ratio.device).unsqueeze(1)
    return ((ratio > 1.0 + eps_high) & (adv > 0)) | ((ratio < 1.0 - clip_eps) & (adv < 0))


def compute_momentum_overshoot(
    ratio_before: torch.Tensor, ratio_after: torch.Tensor, clipped_before: torch.Tensor, mask: torch.Tensor
) -> float:
    """Share of completion tokens that an optimizer step pushed further outside the clip region
    although their gradient was clipped (zero) in that step.

    With zero gradient only optimizer state (momentum, Adam's moments) can move them: the momentum
    overshoot of "On the Hidden Objective Biases of Group-based RL", arXiv 2601.05002.
    Shapes: (S, L) each; returns a fraction of masked tokens.
    """
    m = mask.to(torch.bool)
    further = (ratio_after - 1.0).abs() > (ratio_before - 1.0).abs()
    return float((clipped_before & further & m).sum() / m.sum().clamp_min(1))


def _token_mean(loss: torch.Tensor, mask: torch.Tensor, max_new_tokens: int, n_seqs: float, n_tokens: float) -> torch.Tensor:
    """Mean over all completion tokens of the step (DAPO's token-level loss)."""
    return (loss * mask.to(loss.dtype)).sum() / max(n_tokens, 1.0)


def _seq_mean_token_mean(
    loss: torch.Tensor, mask: torch.Tensor, max_new_tokens: int, n_seqs: float, n_tokens: float
) -> torch.Tensor:
    """Mean over completions of each completion's token mean (original GRPO, DeepSeekMath eq. 3)."""
    m = mask.to(loss.dtype)
    return ((loss * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)).sum() / n_seqs


def _seq_mean_token_sum_norm(
    loss: torch.Tensor, mask: torch.Tensor, max_new_tokens: int, n_seqs: float, n_tokens: float
) -> torch.Tensor:
    """Token sum per completion divided by the constant max_new_tokens, mean over completions (Dr. GRPO)."""
    return ((loss * mask.to(loss.dtype)).sum(dim=1) / float(max_new_tokens)).sum() / n_seqs


LOSS_AGGREGATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor, int, float, float], torch.Tensor]] = {
    "token_mean": _token_mean,
    "seq_mean_token_mean": _seq_mean_token_mean,
    "seq_mean_token_sum_norm": _seq_mean_token_sum_norm,
}


def aggregate_loss(
    loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    max_new_tokens: int,
    n_seqs: int | None = None,
    n_tokens: float | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss (S, L) with mask (S, L) to a scalar by LOSS_AGGREGATIONS[mode].

    Args:
        n_seqs, n_tokens: the whole step's completions and completion tokens when (loss, mask) is one
            micro-batch of it. Every mode is a sum over completions divided by a step-level constant, so
            with the step's totals the micro-batch losses add up to the step's loss, and gradient
            accumulation gives exactly the single-pass update (token means are not taken per micro-batch).
            Default: this batch's own.
    Raises:
        ValueError: unknown mode (lists the valid names).
    """
    if mode not in LOSS_AGGREGATIONS:
        raise ValueError(f"unknown loss_aggregation {mode!r}; valid: {', '.join(LOSS_AGGREGATIONS)}")
    n_seqs = loss.shape[0] if n_seqs is None else n_seqs
    n_tokens = float(mask.sum()) if n_tokens is None else n_tokens
    return LOSS_AGGREGATIONS[mode](loss, mask, max_new_tokens, float(n_seqs), float(n_tokens))


def token_weights(mask: torch.Tensor, mode: str, max_new_tokens: int) -> torch.Tensor:
    """(S, L) the weight aggregate_loss gives each completion token (its derivative in the token's
    loss: every mode is linear in the per-token loss), 0 on padding."""
    loss = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    aggregate_loss(loss, mask.to(torch.float64), mode, max_new_tokens).backward()
    assert loss.grad is not None
    return loss.grad


def prefix_weight_bias(
    completion_ids: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor, group_size: int, mode: str, max_new_tokens: int
) -> float | None:
    """Net weight the loss gives the completion-prefix tokens that every completion of a group shares.

    arXiv 2601.05002 (the second seed paper): a token at the same position with the same history in
    all G completions of a group gets the gradient sum_i w_i A_i grad log pi(token); with uniform
    weights and leave-one-out advantages (sum_i A_i = 0) that is zero, but a loss aggregation that
    weights completions unequally (seq_mean_token_mean with unequal lengths) pushes those shared
    tokens up or down. Per group with such a prefix: sum over its shared tokens of sum_i w_i A_i over
    sum_i w_i |A_i|, with w = token_weights; averaged over those groups.

    Args:
        completion_ids: (S, L) token ids; mask: (S, L) 1 on completion tokens; advantages: (S,);
        group_size: G (rows gG..gG+G-1 are a group); mode, max_new_tokens: the loss aggregation.
    Returns:
        The mean normalised net weight in [-1, 1], or None when no group shares a prefix token (or
        every such group has zero advantages).
    """
    w = token_weights(mask, mode, max_new_tokens)
    length = completion_ids.shape[1]
    ids, m, adv = completion_ids.reshape(-1, group_size, length), mask.reshape(-1, group_size, length).bool(), advantages.double()
    same = (ids == ids[:, :1]).all(dim=1) & m.all(dim=1)  # (N, L): a token every completion has, at this position
    shared = same.to(torch.int64).cumprod(dim=1).bool()  # ... with the same history (all earlier tokens shared too)
    values = []
    for g in torch.nonzero(shared.any(dim=1)).flatten().tolist():
        wg, ag = w.reshape(-1, group_size, length)[g][:, shared[g]], adv.reshape(-1, group_size)[g]
        norm = float((wg * ag.abs()[:, None]).sum())
        if norm > 0:
            values.append(float((wg * ag[:, None]).sum()) / norm)
    return sum(values) / len(values) if values else None


def compute_kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref): exp(d) - d - 1 with d = ref_logp - logp (>= 0).

    Source: J. Schulman, "Approximating KL divergence" (2020); GRPO (DeepSeekMath eq. 4).
    Shapes: (S, L) -> (S, L).
    """
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0
