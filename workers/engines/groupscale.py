"""groupscale's GRPO trainer (engine groupscale): one trial = T optimizer steps at group size G under budget B, then an eval.

Pure of Ray and MLflow: metrics leave through the ``report(metrics, step)`` callback.
Each step samples N = B / G prompts, G completions each (B completions in all), computes rewards,
group advantages (workers.algos), the clipped policy loss and one optimizer step per inner step.
The same code path trains transformers models and the tabular bandit policy (workers.models).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import numpy as np
import torch

from sweeps.metrics import KEPT_AT_CHECKPOINTS, flat_by_construction, result_metrics, summarize, summary_metrics
from sweeps.trial import TrialConfig, TrialResult
from workers import algos
from workers.batch import Batch, sample_batch, setup
from workers.checkpoint import load_checkpoint, save_checkpoint
from workers.distributed import all_gather, all_sum, first_failure, reduce_metrics, seed_rank, sum_gradients, world
from workers.engines.base import NO_SIGNAL_STEP_FRACTION, Report, RunReport, run_report
from workers.evaluation import evaluate
from workers.models.base import Policy
from workers.models.lora import load_trainable_state, parameter_counts, trainable_state
from workers.per_prompt import PerPromptG
from workers.probe import probe_at, probe_during_training
from workers.rewards import RewardError
from workers.tasks import Task

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


def _no_signal_reason(reward_mean: float, truncation: float) -> str:
    if truncation > 0.5:
        return f"most completions were truncated ({truncation:.0%}): raise max_new_tokens"
    if reward_mean < 0.05:
        return f"almost every completion failed (mean reward {reward_mean:.3f}): task too hard for this model"
    if reward_mean > 0.95:
        return f"almost every completion succeeded (mean reward {reward_mean:.3f}): task too easy"
    return "groups had equal rewards in most steps: raise the temperature"


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


def grpo_update(policy: Policy, ref: Policy | None, opt: torch.optim.Optimizer, batch: Batch, cfg: TrialConfig) -> UpdateStats:
    """inner_steps optimizer steps on one batch (mu in GRPO): PPO-clip loss + kl_beta * k3 KL.

    Each step accumulates gradients over micro-batches of ``cfg.grpo.micro_batch_size`` completions; every
    loss aggregation is normalised by the whole step's completions and tokens (algos.aggregate_loss), so
    the update equals the single pass over B, whatever the micro-batch size. Only (S, L) tensors of the
    whole step are kept (ratios, for the clip and momentum diagnostics).

    Returns the last inner step's statistics; the momentum overshoot is averaged over inner steps.
    Raises:
        FloatingPointError: a non-finite loss, KL or gradient norm (the message names which).
    """
    ro, mask, model = batch.rollout, batch.rollout.completion_mask, policy.module
    parts = micro_batches(mask.shape[0], cfg.grpo.micro_batch_size)
    # on several processes ``batch`` is this rank's groups (workers.distributed.shard); the normalisers are the step's
    n_seqs, n_tokens = all_sum([float(mask.shape[0]), float(mask.sum())])
    with torch.no_grad():
        old_logp = (
            torch.cat([policy.logprobs(ro.rows(sl), cfg.grpo.temperature) for sl in parts]) if cfg.grpo.inner_steps > 1 else None
        )
        ref_logp = torch.cat([ref.logprobs(ro.rows(sl), cfg.grpo.temperature) for sl in parts]) if ref is not None else None
    overshoot, prev = [], None  # prev: (ratio, clipped) of the previous inner step
    for _ in range(cfg.grpo.inner_steps):
        opt.zero_grad(set_to_none=True)
        loss_sum, kl_sum, ent_sum, low, high, ratios = 0.0, 0.0, 0.0, 0.0, 0.0, []
        for sl in parts:
            m = mask[sl]
            logp, entropy = policy.logprobs_entropy(ro.rows(sl), cfg.grpo.temperature)
            base = logp.detach() if old_logp is None else old_logp[sl]
            ratios.append(torch.exp(logp.detach() - base))
            per_token, clip = algos.compute_policy_loss(
                logp, base, batch.advantages[sl], m, cfg.grpo.clip_eps, cfg.grpo.clip_eps_high
            )
            if ref_logp is not None:
                kl_tok = algos.compute_kl_k3(logp, ref_logp[sl])
                per_token = per_token + cfg.grpo.kl_beta * kl_tok * m
                kl_sum += float((kl_tok.detach() * m).sum())
            loss = algos.aggregate_loss(per_token, m, cfg.grpo.loss_aggregation, cfg.grpo.max_new_tokens, n_seqs, n_tokens)
            loss.backward()
            tokens = float(m.sum())
            loss_sum, ent_sum = loss_sum + float(loss.detach()), ent_sum + float((entropy.detach() * m).sum())
            low, high = low + clip.clip_frac_low * tokens, high + clip.clip_frac_high * tokens
        ratio = torch.cat(ratios)
        if prev is not None:
            overshoot.append(_overshoot(prev[0], ratio, prev[1], mask, n_tokens))
        sum_gradients(model.parameters())  # the step's gradient: the ranks' shares summed (identity on one process)
        loss_sum, kl_sum, ent_sum, low, high = all_sum([loss_sum, kl_sum, ent_sum, low, high])
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grpo.max_grad_norm))
        values = {"loss": loss_sum, "kl": kl_sum / max(n_tokens, 1.0), "grad_norm": grad_norm}
        bad = [k for k, v in values.items() if not math.isfinite(v)]
        if bad:
            raise FloatingPointError(f"non-finite {', '.join(bad)}")
        opt.step()
        prev = (ratio, algos.clip_active(ratio, batch.advantages, cfg.grpo.clip_eps, cfg.grpo.clip_eps_high))
    if cfg.grpo.inner_steps > 1:  # where did the last step leave the clipped tokens?
        with torch.no_grad():
            after = torch.exp(torch.cat([policy.logprobs(ro.rows(sl), cfg.grpo.temperature) for sl in parts]) - old_logp)
        overshoot.append(_overshoot(prev[0], after, prev[1], mask, n_tokens))
    n = max(n_tokens, 1.0)
    return UpdateStats(
        **values,
        entropy=ent_sum / n,
        clip_frac_low=low / n,
        clip_frac_high=high / n,
        momentum_overshoot_frac=float(np.mean(overshoot)) if overshoot else 0.0,
    )


def _overshoot(before: torch.Tensor, after: torch.Tensor, clipped: torch.Tensor, mask: torch.Tensor, n_tokens: float) -> float:
    """algos.compute_momentum_overshoot over the step's tokens when this rank holds a share of them: the ranks'
    counts of overshooting tokens summed, over the step's n_tokens."""
    local = algos.compute_momentum_overshoot(before, after, clipped, mask) * float(mask.sum())
    return all_sum([local])[0] / max(n_tokens, 1.0)


def train_trial(cfg: TrialConfig, report: Report = lambda m, s: None) -> TrialResult:
    """Run one GRPO trial (CPU, or CUDA with bf16 autocast when cfg.device is cuda).

    With cfg.checkpoint_dir and checkpoint_every, the model, optimizer, RNG states and counters
    are saved every k steps and a restarted trial continues from the last checkpoint.
    Returns a TrialResult; a non-finite loss, KL or gradient, or a failing reward function, ends it as
    ``failed`` with the step and cause, a trial without learning signal in most steps as ``no_signal``.
    A report with ``log_table(rows)`` gets a few eval completions with their rewards (start and end).
    The held-out eval also runs at cfg.eval's checkpoints before the last (logged at its step; by default about
    T/4, T/2 and 3T/4); the result's metrics then hold ``gap@<step>`` (and ``gap_se@<step>``) for each of those steps.
    Raises:
        ValueError: unknown task, preset, advantage, optimizer or loss aggregation; a measure other than
            outcome (workers.measures.run_measure runs each measure).
    """
    if cfg.measure.kind != "outcome":
        raise ValueError(f"train_trial runs measure 'outcome', not {cfg.measure.kind!r}: use workers.measures.run_measure")
    task, policy, rng = setup(cfg.policy)
    seed_rank(cfg.seed)  # on several processes each rank samples its own completions (the model stays the same)
    if world()[0] != 0:  # rank 0 logs; the others compute the same reduced metrics, for reward functions' log_history
        report = lambda metrics, step: None  # noqa: E731
    try:
        return _train(cfg, run_report(report), task, policy, rng)
    finally:
        task.close()  # the reward process of a dataset task


@dataclass(frozen=True)
class _Phase:
    """What a trial is doing, for the reason it failed there: ``label`` ends "... at <label>"; ``step`` and
    ``where`` go to _oom_reason; ``done`` is the steps completed."""

    label: str
    step: int
    done: int
    where: str = "training"


class _Failed(Exception):
    """A trial that ended failed in a phase (train_trial's one failure path)."""

    def __init__(self, result: TrialResult) -> None:
        super().__init__(result.reason)
        self.result = result


@contextmanager
def _guarded(cfg: TrialConfig, phase: _Phase) -> Iterator[None]:
    """Turn a failing reward function, a non-finite value (NonFiniteLogitsError is a FloatingPointError), groups cut
    to another size than G (algos.GroupSizeError, whose reason names its step) or a GPU out of memory inside ``phase``
    into a failed TrialResult with the phase and the cause (raised as _Failed). On several processes every rank enters
    the same phases, and a failure on any rank fails all of them here (the first rank's cause), so none waits on a
    collective the failed rank will not reach."""
    failed = None
    try:
        yield
    except algos.GroupSizeError as e:  # names its step itself
        failed = TrialResult("failed", reason=str(e), steps_done=phase.done)
    except (RewardError, FloatingPointError) as e:
        failed = TrialResult("failed", reason=f"{e} at {phase.label}", steps_done=phase.done)
    except torch.OutOfMemoryError:
        failed = TrialResult("failed", reason=_oom_reason(cfg, phase.step, phase.where), steps_done=phase.done)
    failed = first_failure(failed)
    if failed is not None:
        raise _Failed(failed)


def _step_metrics(cfg: TrialConfig, batch: Batch, upd: UpdateStats, times: tuple[float, float, float]) -> dict[str, float]:
    """One step's metrics (sweeps.metrics.STEP) from its batch, its update and its t0, t1, t2 (seconds)."""
    t0, t1, t2 = times
    ro, mask = batch.rollout, batch.rollout.completion_mask
    groups = batch.reward_groups()
    zero_var = algos.zero_variance_group_fraction(groups)
    windows = algos.group_windows(len(ro.texts), batch.group_sizes)
    causes = algos.no_signal_causes(groups, [ro.texts[w] for w in windows])
    tokens = float(mask.sum())
    uniform = batch.uniform
    aggregation = (cfg.grpo.loss_aggregation, cfg.grpo.max_new_tokens)
    ids = ro.input_ids[:, ro.prompt_len :]
    bias = algos.prefix_weight_bias(ids, mask, batch.advantages, cfg.group_size, *aggregation) if uniform else None
    return {
        "reward_mean": float(batch.rewards.mean()),
        "zero_variance_group_frac": zero_var,
        "prompts_with_signal": (cfg.prompts_per_step if uniform else len(batch.problems)) * (1.0 - zero_var),
        **causes,
        "realized_group_size_min": float(min(batch.group_sizes)),
        "realized_group_size_max": float(max(batch.group_sizes)),
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


def _train(cfg: TrialConfig, report: RunReport, task: Task, policy: Policy, rng: np.random.Generator) -> TrialResult:
    """train_trial's steps, evals and checkpoints on a set-up task and policy; every failure leaves through _guarded."""
    try:
        return _run_steps(cfg, report, task, policy, rng)
    except _Failed as failed:
        return failed.result


def _run_steps(cfg: TrialConfig, report: RunReport, task: Task, policy: Policy, rng: np.random.Generator) -> TrialResult:
    ref = copy.deepcopy(policy) if cfg.grpo.kl_beta > 0 else None  # the starting policy, frozen (before any resume)
    if ref is not None:
        ref.module.requires_grad_(False).eval()
    model = policy.module
    model.train()
    opt = make_optimizer(cfg.grpo.optimizer, [p for p in model.parameters() if p.requires_grad], cfg.grpo.lr)
    ignored = policy.ignored_generation_config
    if ignored:  # sampling follows the spec alone (workers.rollout)
        report.set_tags({"groupscale.generation_config_ignored": ", ".join(f"{k}={v}" for k, v in sorted(ignored.items()))})
    state = _start(cfg, report, task, policy, opt, rng)
    history = state["log_history"]  # the reported step metrics: trainer_state.log_history of reward functions
    counters = state["counters"]
    allocation = None if state.get("allocation") is None else PerPromptG.from_state(state["allocation"])
    evals = set(cfg.eval.checkpoints(cfg.steps)) - {cfg.steps}  # G* over training time (the last: _finish)
    lead = world()[0] == 0  # rank 0 evaluates, probes and saves (one process: always)
    constant = flat_by_construction(cfg.grpo, tabular=cfg.model.get("preset") == "tabular")  # not reported
    for step in range(state["step"] + 1, cfg.steps + 1):
        t0 = time.perf_counter()
        with _guarded(cfg, _Phase(f"step {step}", step, step - 1)):
            batch = sample_batch(policy, task, cfg, rng, step, history, allocation)
            t1 = time.perf_counter()
            upd = grpo_update(policy, ref, opt, batch, cfg)
        if allocation is not None:  # the pass rates the next steps' G follow
            allocation.update(batch.problems, [r.numpy() for r in batch.reward_groups()])
        metrics = reduce_metrics(_step_metrics(cfg, batch, upd, (t0, t1, time.perf_counter())), batch.rewards.numel())
        counters["silent_steps"] += int(metrics["zero_variance_group_frac"] == 1.0)
        counters["reward_sum"] += metrics["reward_mean"]
        counters["trunc_sum"] += metrics["truncation_rate"]
        summarize(counters.setdefault("summary", {}), metrics)  # a checkpoint of before has none
        shown = {k: v for k, v in metrics.items() if k not in constant}
        report(shown, step)
        history.append({**shown, "step": step})
        if step in evals:  # on rank 0 (the others wait at _guarded's agreement)
            with _guarded(cfg, _Phase(f"the evaluation of step {step}", step, step, "the evaluation")):
                mid = evaluate(policy, task, cfg, step, history)[0] if lead else {}
            report(mid, step)
            counters.setdefault("evals", {})[step] = {k: mid[k] for k in KEPT_AT_CHECKPOINTS if k in mid}
        if lead and cfg.probe.every and step % cfg.probe.every == 0:  # the probe's G* as the policy moves
            report(probe_during_training(policy, task, cfg, step), step)
        if cfg.checkpoint_dir and cfg.checkpoint_every and (step % cfg.checkpoint_every == 0 or step == cfg.steps):
            # Points first, then the checkpoint: a worker killed in between resumes from the previous
            # checkpoint and logs some steps twice, but never skips one (the other order could lose
            # every point since the last flush).
            report.flush()
            state["step"] = step
            rngs = all_gather(torch.get_rng_state())  # each rank's sampling RNG (the model and optimizer are the same)
            if lead:
                saved = {"model": trainable_state(model), "optimizer": opt.state_dict(), "torch_rngs": rngs}
                saved |= {} if allocation is None else {"allocation": allocation.to_state()}  # the pass rates so far
                save_checkpoint(cfg.checkpoint_dir, {**state, **saved, "numpy_rng": rng.bit_generator.state})  # LoRA: the adapter
    return _finish(cfg, report, task, policy, state)


def _start(
    cfg: TrialConfig, report: RunReport, task: Task, policy: Policy, opt: torch.optim.Optimizer, rng: np.random.Generator
) -> dict:
    """The trial's state before its first step to run: from its checkpoint (model, optimizer and RNG restored), or
    fresh after the eval before step 1. Keys step (the last done), counters, initial, samples, log_history."""
    ckpt = load_checkpoint(cfg.checkpoint_dir)  # every rank reads it (a storage location every node reaches)
    rank, world_size = world()
    if ckpt is None:
        with _guarded(cfg, _Phase("the evaluation before step 1", 0, 0, "the evaluation")):
            initial, samples = evaluate(policy, task, cfg, 0) if rank == 0 else ({}, [])
        report(initial | parameter_counts(policy.module), 0)  # gap, eval_accuracy: a curve from step 0
        counters = {"silent_steps": 0, "reward_sum": 0.0, "trunc_sum": 0.0}
        allocation = _allocation(cfg, report, task, policy)
        fresh = {"step": 0, "counters": counters, "initial": initial, "samples": samples, "log_history": []}
        return fresh | ({} if allocation is None else {"allocation": allocation.to_state()})
    load_trainable_state(policy.module, ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    rngs = ckpt["torch_rngs"] if "torch_rngs" in ckpt else [ckpt["torch_rng"]]  # one state: a checkpoint of before
    torch.set_rng_state(rngs[rank] if len(rngs) == world_size else rngs[0])  # other processes: a new split
    rng.bit_generator.state = ckpt["numpy_rng"]
    report({"resumed_from_step": float(ckpt["step"])}, ckpt["step"])
    return {
        "step": ckpt["step"],
        "counters": ckpt["counters"],
        "initial": ckpt["initial"],
        "samples": ckpt.get("samples", []),
        "log_history": ckpt.get("log_history", []),
        "allocation": ckpt.get("allocation"),
    }


def _allocation(cfg: TrialConfig, report: RunReport, task: Task, policy: Policy) -> PerPromptG | None:
    """grpo.allocation per_prompt: the probe's pass-rate table at the starting policy (reported as
    ``per_prompt_mse_ratio`` and the tag ``groupscale.per_prompt_table``); None for uniform groups."""
    if cfg.grpo.allocation == "uniform":
        return None
    with _guarded(cfg, _Phase("the per-prompt probe before step 1", 0, 0, "the probe")):
        block = probe_at(policy, task, cfg, 0)["per_prompt"]
    table = ", ".join(f"{r['pass_rate'][0]:g}-{r['pass_rate'][1]:g}: {r['group_size']}" for r in block["buckets"])
    report.set_tags({"groupscale.per_prompt_table": table or f"none ({block.get('reason')}): G {cfg.group_size} for all"})
    if block["mse_ratio"] is not None:
        report({"per_prompt_mse_ratio": block["mse_ratio"]}, 0)
    return PerPromptG(block["buckets"], cfg.group_size)


def _finish(cfg: TrialConfig, report: RunReport, task: Task, policy: Policy, state: dict) -> TrialResult:
    """After the last step: no_signal when most steps had no signal, else the final eval and the trial's metrics; both
    with the steps' summary (sweeps.metrics.SUMMARIZED)."""
    counters, t = state["counters"], cfg.steps
    summary = summary_metrics(counters.get("summary", {}))  # the realized G and the no-signal causes over the steps
    if counters["silent_steps"] > NO_SIGNAL_STEP_FRACTION * t:
        reason = _no_signal_reason(counters["reward_sum"] / t, counters["trunc_sum"] / t)
        reason = f"{counters['silent_steps']}/{t} steps without signal; {reason}"
        return TrialResult("no_signal", metrics=summary, reason=reason, steps_done=t)
    lead = world()[0] == 0
    with _guarded(cfg, _Phase(f"the final evaluation (step {t})", t, t, "the evaluation")):
        final, last = evaluate(policy, task, cfg, t, state["log_history"]) if lead else ({}, [])
    if not lead:
        return TrialResult("succeeded", steps_done=t)  # rank 0's result is the trial's
    report(final, t)
    if state["samples"] + last:
        report.log_table(state["samples"] + last)
    metrics = result_metrics(final, state["initial"], counters.get("evals", {})) | summary
    return TrialResult("succeeded", metrics=metrics, steps_done=t)
