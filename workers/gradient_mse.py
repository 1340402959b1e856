"""Gradient-MSE measurement: the noise of the batch policy gradient at a fixed policy.

At the starting policy, draw the batch gradient g_hat (N = B/G prompts x G completions, the
trial's advantage estimator) ``repeats`` times and report its mean squared error against the
exact gradient of J = E_x V(x). The law predicts, for the loo estimator (THEORY.md),

    E||g_hat - g||^2 = (tau2 G + sigma2 + kappa / (G - 1)) / B.

The estimator is the unbiased sequence-level policy gradient g_hat = (1/B) sum_i A_i s_i with
s_i = grad log pi(y_i | x_i) (the loss aggregation only matters for training).
"""

from __future__ import annotations

import numpy as np
import torch

from sweeps.trial import TrialConfig, TrialOutcome, TrialResult
from workers.batch import sample_batch, setup
from workers.engines.base import Report
from workers.models.base import Policy
from workers.tasks import Task
from workers.tasks.base import ExactComponents

REFERENCE_CHUNK = 512  # prompts per forward pass of the exact gradient


def flat_grad(params: list[torch.nn.Parameter]) -> torch.Tensor:
    """Concatenated .grad of params, (P,) float64 (zeros for params without a gradient)."""
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]).double()


def exact_gradient(policy: Policy, task: Task, cfg: TrialConfig) -> torch.Tensor:
    """grad J of J = sum_x w(x) V(x) over the task's whole training distribution. Returns (P,) float64."""
    if not task.exact_expected_reward:
        raise ValueError(
            "gradient_mse needs an exact expected reward: arithmetic, bandit, "
            "or a jsonl or dataset task with one exact_match reward"
        )
    params = [p for p in policy.module.parameters() if p.requires_grad]
    policy.module.zero_grad(set_to_none=True)
    problems, weights = task.train_support()
    for i in range(0, len(problems), REFERENCE_CHUNK):
        chunk = problems[i : i + REFERENCE_CHUNK]
        w = torch.as_tensor(weights[i : i + REFERENCE_CHUNK], dtype=torch.float32)
        v = task.expected_reward(policy, chunk, max_new_tokens=cfg.grpo.max_new_tokens, temperature=cfg.grpo.temperature)
        (w * v).sum().backward()
    return flat_grad(params)


def batch_gradient(policy: Policy, task: Task, cfg: TrialConfig, rng: np.random.Generator) -> torch.Tensor:
    """One draw of g_hat = (1/B) sum_i A_i grad log pi(y_i | x_i). Returns (P,) float64."""
    params = [p for p in policy.module.parameters() if p.requires_grad]
    batch = sample_batch(policy, task, cfg, rng)
    logp = policy.logprobs(batch.rollout, cfg.grpo.temperature)
    seq_logp = (logp * batch.rollout.completion_mask).sum(dim=1)
    policy.module.zero_grad(set_to_none=True)
    (batch.advantages * seq_logp).mean().backward()
    return flat_grad(params)


def measure_gradient_mse(cfg: TrialConfig, report: Report) -> TrialResult:
    """Run the measurement; metrics grad_mse (the fitted metric), its standard error and the exact
    value where the task knows it (the bandit with the loo estimator)."""
    task, policy, rng = setup(cfg)
    policy.module.eval()  # no dropout: the policy is fixed during the measurement
    g = exact_gradient(policy, task, cfg)
    errors = np.empty(cfg.measure.repeats)
    for r in range(cfg.measure.repeats):
        errors[r] = float(((batch_gradient(policy, task, cfg, rng) - g) ** 2).sum())
        if (r + 1) % 64 == 0 or r + 1 == cfg.measure.repeats:
            report({"grad_mse_running": float(errors[: r + 1].mean())}, r + 1)
    metrics = {
        "grad_mse": float(errors.mean()),
        "grad_mse_se": float(errors.std(ddof=1) / np.sqrt(errors.size)) if errors.size > 1 else float("nan"),
        "grad_norm2_exact": float((g**2).sum()),
    }
    if isinstance(task, ExactComponents) and cfg.grpo.advantage == "loo":
        comp = task.exact_components(policy.module.logits.detach().double().numpy(), cfg.grpo.temperature)
        metrics["grad_mse_exact"] = comp.gradient_mse(cfg.group_size, cfg.samples_per_step)
    report(metrics, cfg.measure.repeats)
    return TrialResult(TrialOutcome.SUCCEEDED, metrics=metrics, steps_done=cfg.measure.repeats)
