"""groupscale's GRPO trainer (engine groupscale): the steps of a trial of T optimizer steps at group size G under budget
B; the rest of the trial (evals, probe, no-signal verdict, its end) is the measurement harness's (workers.engines.harness).

Pure of Ray and MLflow: metrics leave through the ``report(metrics, step)`` callback.
Every k = grpo.steps_per_generation steps a generation samples N = B / G prompts, G completions each (B completions in
all; under tokens_per_step N from the token budget's controller, workers.token_budget), computes rewards and group
advantages (workers.algos) over all of them; each step then takes inner_steps optimizer
steps of the clipped policy loss, in the generation's passes over its k mini-batches of B / k (workers.batch.Generation).
The same code path trains transformers models and the tabular bandit policy (workers.models).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial

import numpy as np
import torch

from sweeps.engines.groupscale import flat_steps
from sweeps.trial import TrialConfig, TrialResult
from workers import algos, dynamic_sampling, groups
from workers.batch import Batch, Generation, sample_batch, setup
from workers.checkpoint import load_checkpoint, save_checkpoint
from workers.distributed import all_gather, all_sum, reduce_metrics, seed_rank, sum_gradients
from workers.engines.base import Placement, Report, run_report
from workers.engines.harness import Harness, Phase, TrialFailed
from workers.models.base import Policy
from workers.models.lora import load_trainable_state, trainable_state
from workers.per_prompt import PerPromptG
from workers.probe import probe_at
from workers.token_budget import TokenBudget

OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


def make_optimizer(name: str, params, lr: float) -> torch.optim.Optimizer:
    """OPTIMIZERS[name](params, lr). Raises ValueError for an unknown name (lists the valid ones)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; valid: {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[name](params, lr=lr)


def _oom_reason(cfg: TrialConfig, step: int, where: str = "training") -> str:
    """The failure of a trial that ran out of GPU memory, with its shape and what to change (not retried)."""
    return (
        f"CUDA out of memory in {where} at step {step} (G={cfg.group_size}, B={cfg.samples_per_step}, "
        f"micro_batch_size={cfg.grpo.micro_batch_size or cfg.samples_per_step}, generation_batch_size="
        f"{cfg.grpo.generation_batch_size or cfg.samples_per_step}, eval.batch_size={cfg.eval.batch_size}): lower "
        "grpo.micro_batch_size (the update stays the same) or grpo.generation_batch_size / eval.batch_size, "
        "turn on grpo.gradient_checkpointing, or use model.dtype bfloat16"
    )


def _cuda_memory(cfg: TrialConfig) -> dict[str, float]:
    """Peak CUDA memory of the step (GiB), then the peak is reset; {} on CPU."""
    if cfg.device != "cuda":
        return {}
    peak = torch.cuda.max_memory_allocated() / 2**30
    torch.cuda.reset_peak_memory_stats()
    return {"cuda_max_memory_gib": peak}


@dataclass
class UpdateStats:
    loss: float
    kl: float
    grad_norm: float
    entropy: float
    clip_frac_low: float
    clip_frac_high: float
    momentum_overshoot_frac: float


def micro_batches(n_rows: int, size: int | None) -> list[slice]:
    """Row slices of at most ``size`` completions (None or >= n_rows: one slice)."""
    size = n_rows if not size or size >= n_rows else size
    return [slice(i, min(i + size, n_rows)) for i in range(0, n_rows, size)]


def grpo_update(
    policy: Policy,
    ref: Policy | None,
    opt: torch.optim.Optimizer,
    batch: Batch,
    cfg: TrialConfig,
    plan: list[slice] | None = None,
    old_logp: torch.Tensor | None = None,
) -> UpdateStats:
    """Optimizer steps on ``batch``: PPO-clip loss (its ratio per token or per sequence: importance_sampling_level) +
    kl_beta * k3 KL.

    Args:
        plan: the rows of ``batch`` each optimizer step trains, in order (default: all of them, inner_steps times: mu).
        old_logp: (S, L) the sampling policy's log-probs of ``batch`` (a generation's, for its later mini-batches);
            default: taken here before the first step when the plan has several, else the current ones (on-policy).
    Each step accumulates gradients over micro-batches of ``cfg.grpo.micro_batch_size`` completions; every loss
    aggregation is normalised by the step's completions and tokens (algos.aggregate_loss), so the update equals the
    single pass over them, whatever the micro-batch size. Returns the last step's statistics, the momentum overshoot
    averaged over the steps (each measured on its own rows after its update: a second step that follows on the same
    rows, else one more forward pass).
    Raises:
        FloatingPointError: a non-finite loss, KL or gradient norm (the message names which).
    """
    plan = plan or [batch.all_rows] * cfg.grpo.inner_steps
    if old_logp is None and len(plan) > 1:
        old_logp = _logprobs(policy, batch, _parts(batch.all_rows, cfg), cfg.grpo.temperature)
    ref_logp = {}  # rows -> the reference policy's log-probs (kl_beta > 0)
    overshoot, prev, values = [], None, {}
    for rows in plan:
        if prev is not None and prev[0] != rows:  # where the last step left its own rows
            overshoot.append(_overshoot(*prev[1:], _ratio(policy, batch, prev[0], old_logp, cfg)))
        if ref is not None and (rows.start, rows.stop) not in ref_logp:
            ref_logp[rows.start, rows.stop] = _logprobs(ref, batch, _parts(rows, cfg), cfg.grpo.temperature)
        ratio, values = _optimizer_step(policy, opt, batch, rows, cfg, old_logp, ref_logp.get((rows.start, rows.stop)))
        if prev is not None and prev[0] == rows:
            overshoot.append(_overshoot(*prev[1:], ratio))
        prev = (
            rows,
            batch.rollout.completion_mask[rows],
            ratio,
            algos.clip_active(ratio, batch.advantages[rows], cfg.grpo.clip_eps, cfg.grpo.clip_eps_high),
        )
    if len(plan) > 1:  # where did the last step leave the clipped tokens?
        overshoot.append(_overshoot(*prev[1:], _ratio(policy, batch, prev[0], old_logp, cfg)))
    return UpdateStats(**values, momentum_overshoot_frac=float(np.mean(overshoot)) if overshoot else 0.0)


def _optimizer_step(
    policy: Policy,
    opt: torch.optim.Optimizer,
    batch: Batch,
    rows: slice,
    cfg: TrialConfig,
    old_logp: torch.Tensor | None,
    ref_logp: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """One optimizer step on ``rows`` of ``batch``: (its ratio before the update (rows, L); its statistics).
    ``ref_logp``: (rows, L)."""
    ro, mask, model, level = batch.rollout, batch.rollout.completion_mask, policy.module, cfg.grpo.importance_sampling_level
    # on several processes ``batch`` is this rank's groups (workers.distributed.shard); the normalisers are the step's
    n_seqs, n_tokens = all_sum([float(rows.stop - rows.start), float(mask[rows].sum())])
    opt.zero_grad(set_to_none=True)
    loss_sum, kl_sum, ent_sum, low, high, ratios = 0.0, 0.0, 0.0, 0.0, 0.0, []
    for sl in _parts(rows, cfg):
        m = mask[sl]
        logp, entropy = policy.logprobs_entropy(ro.rows(sl), cfg.grpo.temperature)
        log_ratio = algos.compute_log_ratio(logp, logp.detach() if old_logp is None else old_logp[sl], m, level)
        ratios.append(torch.exp(log_ratio.detach()))
        zero = torch.zeros((), dtype=logp.dtype, device=logp.device)  # exp(log_ratio - 0) is the ratio
        per_token, clip = algos.compute_policy_loss(
            log_ratio, zero, batch.advantages[sl], m, cfg.grpo.clip_eps, cfg.grpo.clip_eps_high
        )
        if ref_logp is not None:
            kl_tok = algos.compute_kl_k3(logp, ref_logp[sl.start - rows.start : sl.stop - rows.start])
            per_token = per_token + cfg.grpo.kl_beta * kl_tok * m
            kl_sum += float((kl_tok.detach() * m).sum())
        loss = algos.aggregate_loss(per_token, m, cfg.grpo.loss_aggregation, cfg.grpo.max_new_tokens, n_seqs, n_tokens)
        loss.backward()
        tokens = float(m.sum())
        loss_sum, ent_sum = loss_sum + float(loss.detach()), ent_sum + float((entropy.detach() * m).sum())
        low, high = low + clip.clip_frac_low * tokens, high + clip.clip_frac_high * tokens
    sum_gradients(model.parameters())  # the step's gradient: the ranks' shares summed (identity on one process)
    loss_sum, kl_sum, ent_sum, low, high = all_sum([loss_sum, kl_sum, ent_sum, low, high])
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grpo.max_grad_norm))
    n = max(n_tokens, 1.0)
    values = {"loss": loss_sum, "kl": kl_sum / n, "grad_norm": grad_norm}
    bad = [k for k, v in values.items() if not math.isfinite(v)]
    if bad:
        raise FloatingPointError(f"non-finite {', '.join(bad)}")
    opt.step()
    return torch.cat(ratios), values | {"entropy": ent_sum / n, "clip_frac_low": low / n, "clip_frac_high": high / n}


def _parts(rows: slice, cfg: TrialConfig) -> list[slice]:
    """``rows`` in micro-batches of at most grpo.micro_batch_size completions."""
    return [
        slice(rows.start + p.start, rows.start + p.stop) for p in micro_batches(rows.stop - rows.start, cfg.grpo.micro_batch_size)
    ]


def _ratio(policy: Policy, batch: Batch, rows: slice, old_logp: torch.Tensor, cfg: TrialConfig) -> torch.Tensor:
    """(rows, L) the importance ratio of ``rows`` under the current policy, without gradients."""
    logp = _logprobs(policy, batch, _parts(rows, cfg), cfg.grpo.temperature)
    mask = batch.rollout.completion_mask[rows]
    return torch.exp(algos.compute_log_ratio(logp, old_logp[rows], mask, cfg.grpo.importance_sampling_level))


def _logprobs(policy: Policy, batch: Batch, parts: list[slice], temperature: float) -> torch.Tensor:
    """(S, L) log-probs of the step's completions under ``policy``, micro-batch by micro-batch, without gradients."""
    with torch.no_grad():
        return torch.cat([policy.logprobs(batch.rollout.rows(sl), temperature) for sl in parts])


def _overshoot(mask: torch.Tensor, before: torch.Tensor, clipped: torch.Tensor, after: torch.Tensor) -> float:
    """algos.compute_momentum_overshoot of one step's rows (``mask``: theirs) over the step's tokens when this rank holds
    a share of them: the ranks' counts of overshooting tokens summed, over the step's tokens."""
    local = algos.compute_momentum_overshoot(before, after, clipped, mask) * float(mask.sum())
    total, n_tokens = all_sum([local, float(mask.sum())])
    return total / max(n_tokens, 1.0)


def train_trial(cfg: TrialConfig, report: Report = lambda m, s: None, placement: Placement | None = None) -> TrialResult:
    """Run one GRPO trial (CPU, or CUDA with bf16 autocast when cfg.device is cuda) within the measurement harness
    (workers.engines.harness: the evals, the probe, the no-signal verdict, the end); ``placement``: this process in the
    trial (default: alone on cfg.device).

    With cfg.checkpoint_dir and checkpoint_every, the model, optimizer, RNG states and the trial's state are saved
    every k steps (and at T) and a restarted trial continues from the last checkpoint. A non-finite loss, KL or
    gradient, groups cut to another size than G, or a failing reward function end it as ``failed`` with the step and
    cause.
    Raises:
        ValueError: unknown task, preset, advantage, optimizer or loss aggregation; a measure other than
            outcome (workers.measures.run_measure runs each measure).
    """
    if cfg.measure.kind != "outcome":
        raise ValueError(f"train_trial runs measure 'outcome', not {cfg.measure.kind!r}: use workers.measures.run_measure")
    placement = placement or Placement.alone(cfg.device)
    task, policy, rng = setup(cfg)
    seed_rank(cfg.seed, placement.rank)  # each rank samples its own completions (the model stays the same)
    # rank 0 logs; the others compute the same reduced metrics, for reward functions' log_history
    run = run_report(report if placement.is_main else lambda metrics, step: None)
    hidden = flat_steps(cfg.grpo, tabular=cfg.model.get("preset") == "tabular")
    k = cfg.grpo.steps_per_generation  # checkpoints only where a generation ends (or at T): a resume samples afresh
    unit = "steps" if k == 1 else "generations"
    harness = Harness(cfg, placement, run, task, policy, unit, k, hidden, partial(_oom_reason, cfg))
    try:
        return _train(cfg, placement, harness, policy, rng)
    except TrialFailed as failed:
        return failed.result
    finally:
        task.close()  # the reward process of a dataset task


def _step_metrics(
    cfg: TrialConfig, batch: Batch, upd: UpdateStats, times: tuple[float, float, float], prompts: int
) -> dict[str, float]:
    """One step's metrics (sweeps.metrics.STEP) from its batch, its update, its t0, t1, t2 (seconds) and its
    generation's N."""
    t0, t1, t2 = times
    ro, mask = batch.rollout, batch.rollout.completion_mask
    zero_var = algos.zero_variance_group_fraction(batch.reward_groups())
    tokens = float(mask.sum())
    uniform = batch.uniform
    aggregation = (cfg.grpo.loss_aggregation, cfg.grpo.max_new_tokens)
    ids = ro.input_ids[:, ro.prompt_len :]
    bias = algos.prefix_weight_bias(ids, mask, batch.advantages, cfg.group_size, *aggregation) if uniform else None
    return {
        "reward_mean": float(batch.rewards.mean()),
        "zero_variance_group_frac": zero_var,
        "prompts_with_signal": (prompts // cfg.grpo.steps_per_generation if uniform else len(batch.problems)) * (1.0 - zero_var),
        **groups.group_metrics(batch.group_sizes, batch.group_sizes, batch.rewards.reshape(-1), ro.texts),
        **asdict(upd),
        "completion_tokens_mean": tokens / mask.shape[0],
        "truncation_rate": float(ro.truncated.float().mean()),
        "tokens_per_s": tokens / max(t2 - t0, 1e-9),
        "time_generate_s": batch.seconds_generate,
        "time_score_s": batch.seconds_score,
        "time_update_s": t2 - t1,
        **batch.reward_metrics,
        **({} if bias is None else {"prefix_weight_bias": bias}),  # absent: no group shares a prefix
        **_cuda_memory(cfg),
    }


def _train(cfg: TrialConfig, placement: Placement, harness: Harness, policy: Policy, rng: np.random.Generator) -> TrialResult:
    """The trial's steps on a set-up task and policy: a generation of B completions every k = steps_per_generation steps,
    each step training its mini-batch (workers.batch.Generation) and handing its metrics to the harness; a checkpoint
    where the harness says: where a generation ends, or at T (every failure leaves through Harness.guarded)."""
    ref = copy.deepcopy(policy) if cfg.grpo.kl_beta > 0 else None  # the starting policy, frozen (before any resume)
    if ref is not None:
        ref.module.requires_grad_(False).eval()
    model = policy.module
    model.train()
    opt = make_optimizer(cfg.grpo.optimizer, [p for p in model.parameters() if p.requires_grad], cfg.grpo.lr)
    ignored = policy.ignored_generation_config
    if ignored:  # sampling follows the spec alone (workers.rollout)
        tags = {"groupscale.generation_config_ignored": ", ".join(f"{k}={v}" for k, v in sorted(ignored.items()))}
        harness.report.set_tags(tags)
    allocation, budget = _start(cfg, placement, harness, opt, rng)
    gen, summary, sampling, k = None, None, {}, cfg.grpo.steps_per_generation
    for step in harness.steps:
        t0, i = time.perf_counter(), (step - 1) % k  # i: the step's place in its generation (a resume starts at 0)
        with harness.guarded(Phase(f"step {step}", step, step - 1)):
            if i == 0:
                gen, summary, sampling = _generation(policy, harness, cfg, rng, step, allocation, placement, budget)
            assert summary is not None, "a trial resumes where a generation starts (Harness.checkpoint_due)"
            t1 = time.perf_counter()
            upd = None if gen is None else grpo_update(policy, ref, opt, gen.batch, cfg, gen.plans[i], gen.old_logp)
        if allocation is not None and gen is not None:  # the pass rates the next steps' G follow
            allocation.update(gen.batch.problems, [r.numpy() for r in gen.batch.reward_groups()])
        metrics = (sampling if i == 0 else {}) | _signal(sampling, k)  # dynamic sampling's, else none
        if gen is not None and upd is not None:  # else dynamic sampling kept no group: no update
            view = gen.view(i)
            times, prompts = (t0, t1, time.perf_counter()), cfg.prompts_per_step if budget is None else budget.prompts
            metrics = reduce_metrics(_step_metrics(cfg, view, upd, times, prompts), view.rewards.numel()) | metrics
        if i == 0:
            harness.generation(*summary)
        harness.after_step(step, metrics)
        if harness.checkpoint_due(step):
            rngs = all_gather(torch.get_rng_state())  # each rank's sampling RNG (the model and optimizer are the same)
            if placement.is_main:  # LoRA: the adapter alone
                saved = {"trial": harness.state.to_checkpoint(), "model": trainable_state(model), "optimizer": opt.state_dict()}
                saved |= {"torch_rngs": rngs, "numpy_rng": rng.bit_generator.state}
                saved |= {} if allocation is None else {"allocation": allocation.to_state()}  # the pass rates so far
                saved |= {} if budget is None else {"token_budget": budget.to_state()}  # the tokens spent so far
                save_checkpoint(cfg.checkpoint_dir, saved)
    return harness.finish()


def _generation(
    policy: Policy,
    harness: Harness,
    cfg: TrialConfig,
    rng: np.random.Generator,
    step: int,
    allocation: PerPromptG | None,
    placement: Placement,
    budget: TokenBudget | None = None,
) -> tuple[Generation | None, tuple[bool, float, float], dict[str, float]]:
    """The generation the k steps from ``step`` train (None: dynamic sampling kept no group; under tokens_per_step of
    the budget's N prompts), what the harness counts of it (Harness.generation) and its metrics under
    grpo.dynamic_sampling or tokens_per_step (workers.dynamic_sampling.fill, workers.token_budget)."""
    sized = cfg if budget is None else budget.sized(cfg)
    sample = partial(sample_batch, policy, harness.task, sized, rng, step, harness.state.log_history, allocation, placement)
    cap, k = dynamic_sampling.max_batches(cfg.grpo), cfg.grpo.steps_per_generation
    if cap is None:
        batch: Batch | None = sample()
        summary, metrics = _generation_summary(batch), {} if budget is None else budget.record_batch(batch)
    else:
        filled = dynamic_sampling.fill(sample, cap, k)
        batch, summary, metrics = filled.batch, filled.summary, filled.metrics
    if batch is None:
        return None, summary, metrics
    old = _logprobs(policy, batch, _parts(batch.all_rows, cfg), cfg.grpo.temperature) if k > 1 else None
    return Generation.of(batch, cfg, old), summary, metrics  # k > 1: every mini-batch's ratio against the sampling policy


def _signal(sampling: dict[str, float], k: int) -> dict[str, float]:
    """Under dynamic sampling every trained group has signal: prompts_with_signal is the kept groups over the k steps
    (0 for a step without update); {} otherwise (the step's metrics count it)."""
    kept = sampling.get("dynamic_sampling/kept_groups")
    return {} if kept is None else {"prompts_with_signal": kept / k}


def _generation_summary(batch: Batch) -> tuple[bool, float, float]:
    """What the harness counts of a generation (Harness.generation): whether no group had signal, its mean reward and
    its truncated share, over every rank's completions."""
    ro = batch.rollout
    zero_var = algos.zero_variance_group_fraction(batch.reward_groups())
    local = {
        "zero_variance_group_frac": zero_var,
        "reward_mean": float(batch.rewards.mean()),
        "truncation_rate": float(ro.truncated.float().mean()),
    }
    m = reduce_metrics(local, batch.rewards.numel())
    return m["zero_variance_group_frac"] == 1.0, m["reward_mean"], m["truncation_rate"]


def _start(
    cfg: TrialConfig, placement: Placement, harness: Harness, opt: torch.optim.Optimizer, rng: np.random.Generator
) -> tuple[PerPromptG | None, TokenBudget | None]:
    """The trial started from its checkpoint (model, optimizer and RNG restored, the harness's state given back), or
    fresh (the harness's eval before step 1, then the per-prompt table); the per-prompt allocation (None for uniform G)
    and the token budget's controller (None without tokens_per_step), each with its state so far."""
    ckpt = load_checkpoint(cfg.checkpoint_dir)  # every rank reads it (a storage location every node reaches)
    if ckpt is not None and "trial" not in ckpt:  # one of an older version without the trial state: afresh
        ckpt = None
    read = all_gather(None if ckpt is None else ckpt["trial"]["step"])  # one object, written whole: the same on every rank
    if len(set(read)) > 1:  # a rank that cannot reach the storage, or a writer still at work: this start is not a resume
        raise RuntimeError(f"the trial's ranks read checkpoints of different steps {read} at {cfg.checkpoint_dir}")
    if ckpt is None:
        harness.start(None)
        return _allocation(cfg, harness), TokenBudget.of(cfg)
    load_trainable_state(harness.policy.module, ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    rngs = ckpt["torch_rngs"]
    torch.set_rng_state(rngs[placement.rank] if len(rngs) == placement.world_size else rngs[0])  # other P: a new split
    rng.bit_generator.state = ckpt["numpy_rng"]
    harness.start(ckpt["trial"])
    allocation = None if ckpt.get("allocation") is None else PerPromptG.from_state(ckpt["allocation"])
    return allocation, TokenBudget.of(cfg, ckpt.get("token_budget"))


def _allocation(cfg: TrialConfig, harness: Harness) -> PerPromptG | None:
    """grpo.allocation per_prompt: the probe's pass-rate table at the starting policy (reported as
    ``per_prompt_mse_ratio`` and the tag ``groupscale.per_prompt_table``); None for uniform groups."""
    if cfg.grpo.allocation == "uniform":
        return None
    with harness.guarded(Phase("the per-prompt probe before step 1", 0, 0, "the probe")):
        block = probe_at(harness.policy, harness.task, cfg, 0)["per_prompt"]
    table = ", ".join(f"{r['pass_rate'][0]:g}-{r['pass_rate'][1]:g}: {r['group_size']}" for r in block["buckets"])
    harness.report.set_tags({"groupscale.per_prompt_table": table or f"none ({block.get('reason')}): G {cfg.group_size} for all"})
    if block["mse_ratio"] is not None:
        harness.report({"per_prompt_mse_ratio": block["mse_ratio"]}, 0)
    return PerPromptG(block["buckets"], cfg.group_size)
