"""The probe: G* from one batch of rollouts, without a sweep (THEORY.md, "The probe").

At the starting policy, sample K prompts x M completions (M >= 4), take each completion's score
vector s = grad log pi(y | x) (sketched to D dimensions when the model is larger: workers.sketch), and
estimate the variance components with unbiased U-statistic estimators built on the GRPO kernel
h(z, z') = (r - r')(s - s') / 2 (Zhou et al., arXiv 2603.01162; THEORY.md "The variance law"):

    E||h(z1, z2)||^2           = zeta2 + ||g_x||^2      (pairs of distinct completions)
    E<h(z1, z2), h(z1, z3)>    = zeta1 + ||g_x||^2      (triples)
    E<h(z1, z2), h(z3, z4)>    = ||g_x||^2               (quadruples)
    sigma2 = 4 zeta1,   kappa = 2 zeta2 - 4 zeta1,   tau2 = E_x||g_x||^2 - ||E_x g_x||^2,
    G* = 1 + sqrt(kappa / tau2).

Sums over distinct index tuples come from O(M^2 D) identities, not explicit enumeration.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from sweeps import allocation
from sweeps.allocation import PromptComponents
from sweeps.components import VarianceComponents
from sweeps.dynamic_sampling import all_equal_shares, trained_cost_mse
from sweeps.fit import percentile_or_inf, recommend_group_size
from sweeps.spec import ProbeSpec
from sweeps.trial import TrialConfig
from workers.batch import setup
from workers.models.base import Policy
from workers.sketch import CountSketch, TensorSketch
from workers.tasks.base import ExactComponents, Task, completion_ids_of


@dataclass(frozen=True)
class PromptStats:
    """Unbiased per-prompt estimates. u: (D,) estimate of g_x; the rest are scalars."""

    zeta1: float
    zeta2: float
    g_norm2: float
    u: np.ndarray


def prompt_stats(rewards: np.ndarray, scores: np.ndarray) -> PromptStats:
    """Estimates for one prompt from M completions.

    Args:
        rewards: (M,) float rewards, M >= 4.
        scores: (M, D) float score vectors.
    Raises:
        ValueError: M < 4.
    """
    m = rewards.shape[0]
    if m < 4:
        raise ValueError(f"the probe needs at least 4 completions per prompt, got {m}")
    r = rewards.astype(np.float64)
    s = scores.astype(np.float64)
    dr = r[:, None] - r[None, :]  # (M, M) r_i - r_j
    gram = s @ s.T
    sq = np.diag(gram)
    # ||h_ij||^2 = (dr_ij / 2)^2 ||s_i - s_j||^2, zero on the diagonal
    h2 = 0.25 * dr**2 * (sq[:, None] + sq[None, :] - 2 * gram)
    pair_sum = h2.sum()
    # H_i = sum_j h_ij = (s_i sum_j dr_ij - sum_j dr_ij s_j) / 2
    hrow = 0.5 * (s * dr.sum(axis=1, keepdims=True) - dr @ s)  # (M, D)
    tri_sum = float((hrow**2).sum() - pair_sum)
    total = hrow.sum(axis=0)  # sum over ordered pairs i != j of h_ij
    quad_sum = float(total @ total - 2 * pair_sum - 4 * tri_sum)
    n2, n3, n4 = m * (m - 1), m * (m - 1) * (m - 2), m * (m - 1) * (m - 2) * (m - 3)
    g2 = quad_sum / n4
    return PromptStats(zeta1=tri_sum / n3 - g2, zeta2=pair_sum / n2 - g2, g_norm2=g2, u=total / n2)


def combine(stats: list[PromptStats], idx: np.ndarray | None = None, cross: float | None = None) -> VarianceComponents:
    """Average per-prompt estimates (optionally a bootstrap resample ``idx`` of prompt indices).

    ||E_x g_x||^2 is estimated without bias by the mean of <u_k, u_l> over pairs of different prompts
    (mean_gradient_norm2; ``cross``: that estimate when the caller already has it for this ``idx``).
    """
    idx = np.arange(len(stats)) if idx is None else idx
    z1 = np.array([stats[i].zeta1 for i in idx])
    z2 = np.array([stats[i].zeta2 for i in idx])
    g2 = np.array([stats[i].g_norm2 for i in idx])
    cross = mean_gradient_norm2(stats, idx) if cross is None else cross  # ||E g||^2, given when the caller has it
    return VarianceComponents(tau2=float(g2.mean() - cross), sigma2=float(4 * z1.mean()), kappa=float((2 * z2 - 4 * z1).mean()))


def mean_gradient_norm2(stats: list[PromptStats], idx: np.ndarray | None = None) -> float:
    """||E_x g_x||^2 without bias: the mean of <u_k, u_l> over pairs of different prompts (of resample ``idx``)."""
    k = len(stats)
    idx = np.arange(k) if idx is None else idx
    u = np.stack([s.u for s in stats])
    gram = u @ u.T
    counts = np.bincount(idx, minlength=k).astype(np.float64)
    cross_pairs = counts.sum() ** 2 - (counts**2).sum()
    return float((counts @ gram @ counts - (counts**2 * np.diag(gram)).sum()) / max(cross_pairs, 1.0))


def prompt_components(
    stats: list[PromptStats], keys: list[str], rewards: np.ndarray, idx: np.ndarray | None = None
) -> tuple[PromptComponents, np.ndarray]:
    """The per-prompt law's terms (sweeps.allocation) from K probed prompts (or a bootstrap resample ``idx``): the
    draws of one prompt (same ``keys[k]``) pooled, their unbiased estimates averaged and weighted by their count;
    sigma2_x = 4 zeta1_x, kappa_x = 2 zeta2_x - 4 zeta1_x, the pass rate the mean of ``rewards`` (K, M); tau2 as
    ``combine``. Returns the components and (distinct prompts,) the completions behind each pass rate."""
    idx = np.arange(len(stats)) if idx is None else idx
    pooled: dict[str, list[int]] = {}
    for i in idx:
        pooled.setdefault(keys[i], []).append(int(i))
    rows = list(pooled.values())
    z1 = [np.mean([stats[i].zeta1 for i in r]) for r in rows]
    z2 = [np.mean([stats[i].zeta2 for i in r]) for r in rows]
    components = PromptComponents.of(
        combine(stats, idx).tau2,
        4 * np.array(z1),
        2 * np.array(z2) - 4 * np.array(z1),
        np.array([rewards[r].mean() for r in rows]),
        np.array([len(r) for r in rows], np.float64),
    )
    return components, np.array([rewards[r].size for r in rows], np.float64)


def per_prompt(
    stats: list[PromptStats], keys: list[str], rewards: np.ndarray, n_boot: int, seed: int, budget: int | None = None
) -> dict:
    """The probe's ``per_prompt`` block (sweeps.allocation.summary): what per-prompt G would save at this policy with
    no group above ``budget`` (B, completions a step; None: unbounded), its interval from ``n_boot`` resamples of
    the K prompts (numpy Generator ``seed``)."""
    rng = np.random.default_rng([seed, 1])
    k = len(stats)
    resamples = [prompt_components(stats, keys, rewards, rng.integers(0, k, size=k))[0] for _ in range(n_boot)]
    components, completions = prompt_components(stats, keys, rewards)
    return allocation.summary(components, resamples, completions, allocation.G_MAX if budget is None else float(budget))


def filtered(
    stats: list[PromptStats], rewards: np.ndarray, group_sizes: Sequence[int], n_boot: int, seed: int, level: float = 0.95
) -> dict:
    """The probe's ``filtered`` block under dynamic sampling: the law of a step of B trained informative completions
    (THEORY.md "Dynamic sampling", F(G; inf); sweeps.dynamic_sampling.trained_cost_mse) at each G of ``group_sizes``,
    from the K probed prompts' components, ||E g||^2 and (K, M) ``rewards``, and ``n_boot`` resamples of the prompts
    (numpy Generator ``[seed, 2]``). Returns group_sizes; cost_mse (F, B x MSE at the policy); informative_share
    (q(G)); g_star (the G of the least F; None when every F is inf); g_star_ci95 (the resamples' 2.5% and 97.5%
    quantiles of that G); beats ({r: {b: the share of resamples with F(r) < F(b)}}, keys as strings)."""
    gs = np.array(sorted(group_sizes), dtype=np.int64)
    equal = all_equal_shares(rewards, gs)

    def cost(idx: np.ndarray) -> np.ndarray:
        cross = mean_gradient_norm2(stats, idx)  # once a resample: tau2's cross term is F's ||g||^2
        return trained_cost_mse(combine(stats, idx, cross), cross, equal[idx], gs)

    k = len(stats)
    point = cost(np.arange(k))
    rng = np.random.default_rng([seed, 2])
    draws = np.stack([cost(rng.integers(0, k, k)) for _ in range(n_boot)]) if n_boot else point[None, :]
    best = gs[np.argmin(draws, axis=1)]
    tail = (1 - level) / 2
    finite = bool(np.isfinite(point).any())
    return {
        "group_sizes": gs.tolist(),
        "cost_mse": [float(x) if math.isfinite(x) else None for x in point],
        "informative_share": (1.0 - equal.mean(axis=0)).tolist(),
        "g_star": int(gs[np.argmin(point)]) if finite else None,
        "g_star_ci95": [int(np.quantile(best, q, method="inverted_cdf")) for q in (tail, 1 - tail)] if finite else None,
        "beats": {
            str(r): {str(b): float((draws[:, i] < draws[:, j]).mean()) for j, b in enumerate(gs)} for i, r in enumerate(gs)
        },
    }


def bootstrap_interval(stats: list[PromptStats], n_boot: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of G* over prompts: ``n_boot`` resamples of the K prompts with
    replacement (numpy Generator ``seed``), each combined without bias (``combine``).

    Returns (lo, hi), inf where a resample's tau2 <= 0 pushes a percentile there; (inf, inf) when n_boot is 0.
    """
    if not n_boot:
        return math.inf, math.inf
    k = len(stats)
    rng = np.random.default_rng(seed)
    draws = np.sort([combine(stats, rng.integers(0, k, k)).g_star for _ in range(n_boot)])
    tail = 100 * (1 - level) / 2
    return percentile_or_inf(draws, tail), percentile_or_inf(draws, 100 - tail)


# The three drivers below score and sample a model and assemble the result: `make mutation` leaves them out
# (tests/workers/test_scores.py, the bandit's probe tests and the e2e probe check them); it mutates the
# estimators above.
# pragma: no mutate block
def score_vectors(
    policy: Policy,
    rollout,
    temperature: float,
    sketch: CountSketch | TensorSketch | None,
    params: list[torch.nn.Parameter] | None = None,
    batched: bool = True,
    chunk: int = 64,
) -> np.ndarray:
    """(S, D) per-completion scores grad log pi(y_i | x_i) over ``params`` (default: all trainable), sketched.

    For language models, ``chunk`` completions per backward pass (workers.scores): with a TensorSketch, sketched
    inside the backward pass from each layer's factors (the probe's path); else each row's gradient formed, exact,
    then count-sketched (the path before 2026-12, kept for comparison). One backward pass per completion otherwise
    (the tabular policy, ``batched=False``, or a module kind without a rule), sketched as a whole.
    """
    params = params or [p for p in policy.module.parameters() if p.requires_grad]
    if batched and hasattr(policy.module, "get_output_embeddings"):
        from workers.scores import UnsupportedModule, batched_scores, sketched_scores

        try:
            if isinstance(sketch, TensorSketch):
                return sketched_scores(policy.module, rollout, temperature, params, sketch, chunk).numpy()
            return batched_scores(policy.module, rollout, temperature, params, sketch, chunk).numpy()
        except UnsupportedModule:
            pass
    rows = []
    for i in range(rollout.input_ids.shape[0]):
        one = rollout.rows(slice(i, i + 1))
        logp = (policy.logprobs(one, temperature) * one.completion_mask).sum()
        grads = torch.autograd.grad(logp, params)
        flat = torch.cat([g.reshape(-1) for g in grads]).double()
        rows.append((sketch(flat) if sketch else flat).numpy())
    return np.stack(rows)


def run_probe(cfg: TrialConfig, probe: ProbeSpec, n_boot: int = 200, group_sizes: Sequence[int] | None = None) -> dict:
    """Estimate tau2, sigma2, kappa and G* at the policy trial ``cfg`` starts from.

    Args:
        cfg: the policy (task, model, LoRA, device) and its sampling (grpo's temperature, max_new_tokens).
        probe: the spec's probe section: K = ``prompts`` and M = ``completions`` (M >= 4; the cost is K * M samples);
            ``projection_dim`` D (score vectors of larger policies are sketched to D dimensions, workers.sketch); ``seed``;
            ``parameters`` (``all``, ``lm_head``, ``last_layers:K`` or ``lora``, workers.scores.select_parameters:
            scores over a subset, for models too large for full-parameter scores, a different G*: see README).
        n_boot: bootstrap resamples of the prompts for g_star_ci95 (0: none).
        group_sizes: under ``grpo.dynamic_sampling`` the G at which the filtered law is compared (``filtered``;
            default: every G from 2 to min(B, 64)).
    Returns:
        JSON-ready dict with tau2, sigma2, kappa, g_star, g_star_ci95 (bootstrap over prompts),
        samples, seconds, message; g_star is None (with a reason) when tau2 is not positive; under dynamic
        sampling also ``filtered`` (the ``filtered`` function's block).
    """
    start = time.perf_counter()
    task, policy, rng = setup(cfg)
    return probe_policy(policy, task, cfg, rng, probe, n_boot, start=start, group_sizes=group_sizes)


def _probed(module: torch.nn.Module, parameters: str) -> list[torch.nn.Parameter]:
    """The parameters whose scores the probe takes: every trainable one (``all``), else workers.scores'
    select_parameters (``lora``, ``last_layers:k``, ``lm_head``)."""
    if parameters == "all":
        return [p for p in module.parameters() if p.requires_grad]
    from workers.scores import select_parameters

    return select_parameters(module, parameters)


def probe_policy(
    policy: Policy,
    task: Task,
    cfg: TrialConfig,
    rng: np.random.Generator,
    probe: ProbeSpec,
    n_boot: int,
    start: float | None = None,
    group_sizes: Sequence[int] | None = None,
) -> dict:
    """run_probe(cfg, probe, n_boot, group_sizes) at ``policy`` as it is now (a trial's current policy at a checkpoint:
    probe.every). Draws prompts from ``rng`` and puts the module back in its train/eval mode."""
    prompts, completions, projection_dim = probe.prompts, probe.completions, probe.projection_dim
    gs = group_sizes or range(2, min(cfg.samples_per_step, 64) + 1)  # under dynamic sampling: where F is compared
    seed, parameters = probe.seed, probe.parameters
    start = time.perf_counter() if start is None else start
    was_training = policy.module.training
    policy.module.eval()
    params = _probed(policy.module, parameters)
    n_params = sum(p.numel() for p in params)
    sketch = TensorSketch(params, projection_dim, seed) if n_params > projection_dim else None
    problems = task.sample_train(prompts, rng)
    expanded = [p for p in problems for _ in range(completions)]
    ro = policy.sample([p.prompt for p in expanded], max_new_tokens=cfg.grpo.max_new_tokens, temperature=cfg.grpo.temperature)
    rewards = task.rewards(expanded, ro.texts, rng, completion_ids_of(ro)).reshape(prompts, completions)
    scores = score_vectors(policy, ro, cfg.grpo.temperature, sketch, params).reshape(prompts, completions, -1)
    policy.module.train(was_training)
    stats = [prompt_stats(rewards[k], scores[k]) for k in range(prompts)]
    est = combine(stats)
    lo, hi = bootstrap_interval(stats, n_boot, seed)
    g_star = est.g_star
    # the integer G with the smallest predicted MSE (no budget here: any G from 2 up)
    rec = recommend_group_size(g_star, range(2, max(64, math.ceil(2 * g_star)) + 1)) if math.isfinite(g_star) else None
    out = {
        **asdict(est),
        "g_star": g_star if math.isfinite(g_star) else None,
        "g_star_ci95": [float(lo) if math.isfinite(lo) else None, float(hi) if math.isfinite(hi) else None],
        "recommended_group_size": rec,
        "interval_covers": "the sampling noise of these K x M rollouts at the current policy only, "
        "not how G* moves during training or over a finite number of steps",
        "prompts": prompts,
        "completions": completions,
        "samples": prompts * completions,
        "projection_dim": sketch.dim if sketch else n_params,
        "parameters": parameters,
        "n_parameters": n_params,
        "reward_mean": float(rewards.mean()),
        "zero_variance_prompt_frac": float((rewards.std(axis=1) == 0).mean()),
        "per_prompt": per_prompt(stats, [p.key for p in problems], rewards, n_boot, seed, cfg.samples_per_step),
        **({} if cfg.grpo.dynamic_sampling is None else {"filtered": filtered(stats, rewards, gs, n_boot, seed)}),
        "seconds": time.perf_counter() - start,
        "message": (
            f"G* = {g_star:.3g} = 1 + sqrt(kappa / tau2): use G = {rec} (the interval covers the probe's "
            "sampling noise at the current policy only)"
            if math.isfinite(g_star)
            else "tau2 <= 0: the prompts' true gradients did not differ measurably; raise prompts (K)"
        ),
    }
    return out | _exact(policy, task, cfg)


def _exact(policy: Policy, task: Task, cfg: TrialConfig) -> dict:
    """``exact``: the task's exact components and G* at the policy, where it has them (the bandit); else nothing."""
    if not isinstance(task, ExactComponents):
        return {}
    exact = task.exact_components(policy.module.logits.detach().double().numpy(), cfg.grpo.temperature)
    return {"exact": {**asdict(exact), "g_star": exact.g_star}}


def probe_at(policy: Policy, task: Task, cfg: TrialConfig, step: int) -> dict:
    """probe_policy's result (no bootstrap) at a trial's current policy after ``step`` steps, with a forked torch RNG
    and its own prompt RNG (seeded by probe.seed and ``step``), so that training goes on exactly as without it."""
    p = cfg.probe
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if cfg.device == "cuda" else []):
        return probe_policy(policy, task, cfg, np.random.default_rng([p.seed, step]), p, n_boot=0)


def probe_during_training(policy: Policy, task: Task, cfg: TrialConfig, step: int) -> dict[str, float]:
    """probe_tau2, probe_sigma2, probe_kappa, probe_g_star at a trial's current policy (``probe.every``, both
    engines; probe_at); no probe_g_star when tau2 <= 0 (G* beyond reach)."""
    out = probe_at(policy, task, cfg, step)
    return {f"probe_{k}": float(out[k]) for k in ("tau2", "sigma2", "kappa", "g_star") if out.get(k) is not None}
