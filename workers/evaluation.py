"""The held-out evaluation every engine's trial reports: the gap to the best reward on the task's eval prompts, sampled
with one seed for every trial (common random numbers), and a few samples for MLflow's table."""

from __future__ import annotations

import math

import numpy as np
import torch

from sweeps.trial import TrialConfig
from workers.batch import score_completions, trainer_state
from workers.models.base import Policy
from workers.tasks import Problem, Task

EVAL_SEED = 20260101  # common random numbers: every trial samples its eval with the same seed
SAMPLES_LOGGED = 12  # eval completions per trial written to MLflow's table (prompt, completion, reward)


def evaluate(
    policy: Policy, task: Task, cfg: TrialConfig, step: int = 0, log_history: list[dict] | None = None
) -> tuple[dict[str, float], list[dict]]:
    """Held-out reward under the policy's own sampling (temperature as in training), and a few samples.

    With an exact expected reward (arithmetic by teacher forcing, the bandit by enumeration, exact-match
    data) ``eval_accuracy`` is that expectation, so it carries no sampling noise, and
    ``eval_accuracy_sampled`` samples one completion per prompt. Otherwise (user rewards, numeric_match)
    ``eval_accuracy`` is the mean reward of ``eval_samples_per_prompt`` sampled completions per prompt,
    and ``gap_se`` is its standard error from the completions' sampling (the prompts are a fixed set):
    sqrt(mean_x var_x / k / n) with var_x the reward variance over the k samples of prompt x.
    gap = mean(max reward - expected reward) (THEORY.md). Every eval samples with the seed EVAL_SEED.

    Returns:
        (metrics, samples): samples are {step, prompt, completion, reward} dicts for MLflow's table, with the
        columns reward functions gave to ``log_extra`` (TRL's completions table).
    Raises:
        workers.rewards.RewardError: a reward function failed.
        FloatingPointError: non-finite logits in generation.
        torch.OutOfMemoryError: the eval batch does not fit (lower eval.batch_size).
    """
    problems = task.eval_problems(cfg.eval.prompts)
    best = task.max_reward(problems)
    exact = task.exact_expected_reward
    k = 1 if exact else cfg.eval.samples_per_prompt
    expanded = [p for p in problems for _ in range(k)]
    module = policy.module
    was_training = module.training
    module.eval()
    rewards, texts, chunk = [], [], max(1, cfg.eval.batch_size)
    extras: dict[str, list] = {}
    state = trainer_state(cfg, task, step, log_history)
    with torch.random.fork_rng():
        torch.manual_seed(EVAL_SEED)
        for i in range(0, len(expanded), chunk):
            part = expanded[i : i + chunk]
            with torch.no_grad():
                ro = policy.sample(
                    [p.prompt for p in part], max_new_tokens=cfg.grpo.max_new_tokens, temperature=cfg.grpo.temperature
                )
            scored = score_completions(task, part, ro, np.random.default_rng(EVAL_SEED + i), state)
            rewards.append(scored.rewards)
            for column, values in scored.extras.items():  # a column some chunk lacks is left out
                if len(extras.setdefault(column, [])) == len(texts):
                    extras[column] += values
            texts += ro.texts
    r = np.concatenate(rewards).astype(np.float64).reshape(len(problems), k)
    metrics = {"eval_accuracy_sampled": float(r[:, 0].mean())}
    if exact:
        v = np.concatenate([_expected(policy, task, problems[i : i + chunk], cfg) for i in range(0, len(problems), chunk)])
    else:
        v = r.mean(axis=1)
        var = r.var(axis=1, ddof=1) if k > 1 else np.full(len(problems), r.var(ddof=1) if r.size > 1 else 0.0)
        metrics["gap_se"] = float(math.sqrt(var.mean() / k / len(problems)))
    module.train(was_training)
    samples = _samples(policy, problems, texts, r, extras, step)
    return {"eval_accuracy": float(v.mean()), **metrics, "gap": float((best - v).mean())}, samples


def _samples(
    policy: Policy, problems: list[Problem], texts: list[str], r: np.ndarray, extras: dict[str, list], step: int
) -> list[dict]:
    """The first completion of each of the first SAMPLES_LOGGED prompts (rewards ``r``: (prompts, k)) as rows of
    MLflow's table: {step, prompt, completion, reward} and the reward functions' ``log_extra`` columns."""
    k = r.shape[1]
    extras = {c: v for c, v in extras.items() if len(v) == len(texts) and c not in ("step", "prompt", "completion", "reward")}
    return [
        {
            "step": step,
            "prompt": policy.render(problems[i // k].prompt),
            "completion": texts[i],
            "reward": float(r.flat[i]),
            **{column: values[i] for column, values in extras.items()},
        }
        for i in range(0, min(len(texts), SAMPLES_LOGGED * k), k)
    ]


def _expected(policy: Policy, task: Task, problems: list[Problem], cfg: TrialConfig) -> np.ndarray:
    with torch.no_grad():
        v = task.expected_reward(policy, problems, max_new_tokens=cfg.grpo.max_new_tokens, temperature=cfg.grpo.temperature)
    return v.double().cpu().numpy()
