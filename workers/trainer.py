"""The GRPO trainer: one trial = T optimizer steps at group size G under budget B, then an eval.

Pure of Ray and MLflow: metrics leave through the ``report(metrics, step)`` callback.
Each step samples N = B / G prompts, G completions each (B completions in all), computes rewards,
group advantages (workers.algos), the clipped policy loss and one AdamW step per inner step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sweeps.planner import TrialPlan
from sweeps.spec import SweepSpec
from workers import algos
from workers.models.loading import load_policy
from workers.rollout import completion_logprobs, generate, sequence_probability
from workers.tasks import Task, make_task

Report = Callable[[dict[str, float], int], None]
NO_SIGNAL_STEP_FRACTION = 0.5  # a trial with more steps than this without any signal is no_signal
EVAL_SEED = 20260101  # common random numbers: every trial samples its eval with the same seed


@dataclass(frozen=True)
class TrialConfig:
    """Everything one trial needs (plain data, so it travels to Ray workers)."""

    task: dict[str, Any]
    model: dict[str, Any]
    group_size: int  # G
    samples_per_step: int  # B
    seed: int
    steps: int  # T
    advantage: str = "loo"
    lr: float = 2e-4
    temperature: float = 1.0
    max_new_tokens: int = 4
    clip_eps: float = 0.2
    inner_steps: int = 1
    kl_beta: float = 0.0
    loss_aggregation: str = "seq_mean_token_mean"
    max_grad_norm: float = 1.0
    eval_prompts: int = 512
    cache_dir: str = ".groupscale/models"
    num_threads: int = 1

    @property
    def prompts_per_step(self) -> int:  # N
        return self.samples_per_step // self.group_size

    @classmethod
    def from_spec(cls, spec: SweepSpec, plan: TrialPlan, cache_dir: str | Path) -> TrialConfig:
        g = spec.grpo
        return cls(
            task=spec.task.model_dump(),
            model=spec.model.model_dump(exclude_none=True),
            group_size=plan.group_size,
            samples_per_step=plan.samples_per_step,
            seed=plan.seed,
            steps=spec.steps,
            advantage=g.advantage,
            lr=g.lr,
            temperature=g.temperature,
            max_new_tokens=g.max_new_tokens,
            clip_eps=g.clip_eps,
            inner_steps=g.inner_steps,
            kl_beta=g.kl_beta,
            loss_aggregation=g.loss_aggregation,
            max_grad_norm=g.max_grad_norm,
            eval_prompts=spec.eval.prompts,
            cache_dir=str(cache_dir),
            num_threads=max(1, int(spec.resources.cpus_per_trial)),
        )


@dataclass
class TrialResult:
    """status: succeeded | failed | no_signal; metrics: final metrics; reason: why, if not succeeded."""

    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    steps_done: int = 0


def evaluate(model, tokenizer, task: Task, cfg: TrialConfig) -> dict[str, float]:
    """Held-out accuracy under the policy's own sampling (temperature as in training).

    ``eval_accuracy`` is the expected exact-match accuracy, computed exactly by teacher forcing
    (no sampling noise); ``eval_accuracy_sampled`` samples one completion per prompt with a fixed
    seed. gap = 1 - eval_accuracy (THEORY.md: max reward - achieved expected reward).
    """
    problems = task.eval_problems(cfg.eval_prompts)
    prompts, answers = [p.prompt for p in problems], [p.answer for p in problems]
    model.eval()
    exact = sequence_probability(
        model, tokenizer, prompts, answers, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature
    )
    with torch.random.fork_rng():
        torch.manual_seed(EVAL_SEED)
        ro = generate(model, tokenizer, prompts, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature)
    model.train()
    sampled = float(np.mean([task.reward(t, a) for t, a in zip(ro.texts, answers)]))
    acc = float(exact.mean())
    return {"eval_accuracy": acc, "eval_accuracy_sampled": sampled, "gap": 1.0 - acc}


def _no_signal_reason(reward_mean: float, truncation: float) -> str:
    if truncation > 0.5:
        return f"most completions were truncated ({truncation:.0%}): raise max_new_tokens"
    if reward_mean < 0.05:
        return f"almost every completion failed (mean reward {reward_mean:.3f}): task too hard for this model"
    if reward_mean > 0.95:
        return f"almost every completion succeeded (mean reward {reward_mean:.3f}): task too easy"
    return "groups had equal rewards in most steps: raise the temperature"


def train_trial(cfg: TrialConfig, report: Report = lambda m, s: None) -> TrialResult:
    """Run one GRPO trial on CPU (or the device the model was loaded on).

    Returns a TrialResult; a non-finite loss or gradient ends it as ``failed`` with the step and
    cause, a trial without learning signal in most steps as ``no_signal``.
    Raises:
        ValueError: unknown task, preset, advantage or loss aggregation.
    """
    torch.set_num_threads(cfg.num_threads)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    task = make_task(cfg.task)
    model, tokenizer = load_policy(cfg.model, task, Path(cfg.cache_dir))
    ref = None
    if cfg.kl_beta > 0:
        ref, _ = load_policy(cfg.model, task, Path(cfg.cache_dir))
        ref.requires_grad_(False).eval()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    initial = evaluate(model, tokenizer, task, cfg)
    report({f"{k}_initial": v for k, v in initial.items()}, 0)
    g, n = cfg.group_size, cfg.prompts_per_step
    silent_steps, reward_sum, trunc_sum = 0, 0.0, 0.0
    for step in range(1, cfg.steps + 1):
        t0 = time.perf_counter()
        problems = task.sample_train(n, rng)
        prompts = [p.prompt for p in problems for _ in range(g)]  # each prompt's G completions adjacent
        model.eval()
        ro = generate(model, tokenizer, prompts, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature)
        model.train()
        t1 = time.perf_counter()
        answers = [p.answer for p in problems for _ in range(g)]
        rewards = torch.tensor([task.reward(t, a) for t, a in zip(ro.texts, answers)]).view(n, g)
        adv = algos.compute_advantages(rewards, cfg.advantage).reshape(-1)
        zero_var = algos.zero_variance_group_fraction(rewards)
        silent_steps += zero_var == 1.0
        mask = ro.completion_mask
        old_logp = completion_logprobs(model, ro, cfg.temperature).detach() if cfg.inner_steps > 1 else None
        ref_logp = completion_logprobs(ref, ro, cfg.temperature).detach() if ref is not None else None
        for _ in range(cfg.inner_steps):
            logp = completion_logprobs(model, ro, cfg.temperature)
            per_token, clip = algos.compute_policy_loss(
                logp, logp.detach() if old_logp is None else old_logp, adv, mask, cfg.clip_eps
            )
            kl = torch.zeros(())
            if ref_logp is not None:
                kl_tok = algos.compute_kl_k3(logp, ref_logp)
                per_token = per_token + cfg.kl_beta * kl_tok * mask
                kl = (kl_tok * mask).sum() / mask.sum().clamp_min(1.0)
            loss = algos.aggregate_loss(per_token, mask, cfg.loss_aggregation, cfg.max_new_tokens)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm).detach())
            values = {"loss": float(loss.detach()), "kl": float(kl.detach()), "grad_norm": grad_norm}
            bad = [k for k, v in values.items() if not math.isfinite(v)]
            if bad:
                return TrialResult("failed", reason=f"non-finite {', '.join(bad)} at step {step}", steps_done=step - 1)
            opt.step()
        t2 = time.perf_counter()
        tokens = float(mask.sum())
        reward_sum += float(rewards.mean())
        trunc_sum += float(ro.truncated.float().mean())
        report(
            {
                "reward_mean": float(rewards.mean()),
                "zero_variance_group_frac": zero_var,
                "loss": float(loss.detach()),
                "grad_norm": grad_norm,
                "kl": float(kl),
                "clip_frac_low": clip.clip_frac_low,
                "clip_frac_high": clip.clip_frac_high,
                "completion_tokens_mean": tokens / mask.shape[0],
                "truncation_rate": float(ro.truncated.float().mean()),
                "tokens_per_s": tokens / max(t2 - t0, 1e-9),
                "time_generate_s": t1 - t0,
                "time_update_s": t2 - t1,
            },
            step,
        )
    if silent_steps > NO_SIGNAL_STEP_FRACTION * cfg.steps:
        reason = _no_signal_reason(reward_sum / cfg.steps, trunc_sum / cfg.steps)
        return TrialResult("no_signal", reason=f"{silent_steps}/{cfg.steps} steps without signal; {reason}", steps_done=cfg.steps)
    final = evaluate(model, tokenizer, task, cfg)
    metrics = {**final, **{f"{k}_initial": v for k, v in initial.items()}}
    report(final, cfg.steps)
    return TrialResult("succeeded", metrics=metrics, steps_done=cfg.steps)
