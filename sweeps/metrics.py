"""The metrics a trial logs, each with what it means: the one registry the docs' metric reference is generated from.

STEP holds what the trainer reports every step, but for those a trial's settings make constant
(``flat_by_construction``: not logged, so MLflow's first charts show learning); EVAL what a held-out eval
reports (at step 0, at the ``eval.every`` checkpoints and at T; a trial's result keeps the step-0 values as
``<name>_initial`` and the checkpoints' gap as ``gap@<step>``); PROBE what ``probe.every`` adds. A trial's result
(succeeded or no_signal) also keeps SUMMARIZED over its steps under the step metric's name. Keys that
carry a name of the user's (a reward function's) are listed by their prefix in PREFIXES.
tests/workers/test_metrics.py checks that a real trial reports nothing that is not here.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweeps.spec.grpo import GRPOSpec

STEP: dict[str, str] = {
    "reward_mean": "mean reward of the step's B completions (the learning signal)",
    "zero_variance_group_frac": "share of groups whose G rewards are all equal (they carry no gradient)",
    "prompts_with_signal": "N x (1 - zero_variance_group_frac): prompts that taught something this step (grpo.dynamic_sampling: "
    "the kept groups over k)",
    "loss": "the PPO-clip loss (with one inner step it is taken at ratio 1, so near 0 by construction)",
    "kl": "k3 estimate of KL(pi || pi_ref) (0 without kl_beta)",
    "grad_norm": "norm of the step's gradient before clipping",
    "entropy": "mean per-token entropy of the sampled completions",
    "clip_frac_low": "share of tokens clipped at 1 - clip_eps (0 with one inner step)",
    "clip_frac_high": "share of tokens clipped at 1 + clip_eps_high (0 with one inner step)",
    "momentum_overshoot_frac": "tokens an inner step pushed further out of the clip region although clipped (arXiv 2601.05002)",
    "prefix_weight_bias": "net loss weight on completion prefixes shared by a whole group (arXiv 2601.05002); absent without one",
    "completion_tokens_mean": "mean completion length in tokens",
    "truncation_rate": "share of completions cut at max_new_tokens (engine trl: TRL's completions/clipped_ratio)",
    "realized_group_size_min": "fewest completions a group of the step trained on (a trial where a group's differs from its "
    "configured G fails: the trial's G, or under grpo.allocation per_prompt the group's own)",
    "realized_group_size_max": "most completions a group of the step trained on (per_prompt: up to the table's largest G + 1, "
    "the step's last prompt taking what is left of B)",
    "frac_groups_identical": "share of groups whose completions are all the same text (no signal whatever the rewards)",
    "frac_groups_all_wrong": "share of groups of differing completions whose rewards are all equal and <= 0",
    "frac_groups_all_right": "share of groups of differing completions whose rewards are all equal and >= 1",
    "tokens_per_s": "completion tokens per second of the step (generation and update)",
    "time_generate_s": "seconds spent sampling the step's completions",
    "time_score_s": "seconds spent on rewards, values and advantages",
    "time_update_s": "seconds spent on the optimizer update",
    "reward_abstentions": "completions every reward function returned None on (they count 0)",
    "cuda_max_memory_gib": "peak CUDA memory of the step (GPU trials)",
    "parameters_trainable": "trainable parameters (step 0; the LoRA adapter's with model.lora)",
    "parameters_total": "all parameters of the model (step 0)",
    "resumed_from_step": "the checkpoint step a restarted trial continued from",
    "dynamic_sampling/batches": "grpo.dynamic_sampling: generations of N prompts the step's generation spent (at its first "
    "step; workers/dynamic_sampling.py)",
    "dynamic_sampling/kept_groups": "grpo.dynamic_sampling: informative groups the generation trains (N, or fewer when "
    "max_batches ran out; 0: no update)",
    "dynamic_sampling/informative_share": "grpo.dynamic_sampling: share of the sampled groups whose rewards were not all equal",
    "sampled_completions": "grpo.dynamic_sampling: completions sampled for the generation (all its generations of B)",
    "token_budget/prompts": "tokens_per_step: N, the prompts the step's generation sampled (workers/token_budget.py)",
    "token_budget/completion_tokens": "tokens_per_step: completion tokens the step's generation sampled",
    "token_budget/spent_share": "tokens_per_step: completion tokens sampled so far over the budget so far (1: on budget)",
}
EVAL: dict[str, str] = {
    "gap": "max reward - expected reward on the held-out prompts: the metric the law is fitted to (lower is better)",
    "gap_se": "standard error of gap from the eval's own sampling (sampled evals only)",
    "eval_accuracy": "expected held-out reward (exact where the task allows, else the mean of sampled completions)",
    "eval_accuracy_sampled": "held-out reward of one sampled completion per prompt (tasks with an exact expectation)",
}
PROBE: dict[str, str] = {
    "probe_tau2": "tau2 at the current policy: spread of the prompts' true gradients (THEORY.md)",
    "probe_sigma2": "sigma2 at the current policy: the oracle's per-sample gradient variance",
    "probe_kappa": "kappa at the current policy: GRPO's excess variance constant",
    "probe_g_star": "1 + sqrt(kappa / tau2) at the current policy",
    "per_prompt_mse_ratio": "grpo.allocation per_prompt (step 0): the probe's gradient MSE of the optimal per-prompt G over "
    "the best uniform G's at the starting policy (THEORY.md 'Per-prompt G')",
}
MEASURE: dict[str, str] = {
    "grad_mse": "gradient_mse trials: mean squared error of the batch gradient against the exact one",
    "grad_mse_se": "its standard error over the draws",
    "grad_mse_exact": "the law's prediction (tau2 G + sigma2 + kappa/(G-1)) / B where the task knows it (the bandit)",
    "grad_mse_running": "the running mean of grad_mse every 64 draws",
    "grad_norm2_exact": "squared norm of the exact gradient",
}
PREFIXES: dict[str, str] = {
    "reward/": "each reward term's mean per step (reward/<file stem>.<function>)",
    "reward_log/": "what reward functions logged with TRL's log_metric (numeric_match.unreadable_references: the step's "
    "references numeric_match could not read as a number, scored 0)",
    "system/": "MLflow's system metrics (CPU, memory, disk, network, GPU) every 5 s",
}


def flat_by_construction(grpo: GRPOSpec, tabular: bool = False) -> dict[str, str]:
    """The STEP metrics the groupscale trainer would report as constants under ``grpo`` (and for the ``tabular``
    preset's policy), each with why; they are not logged.

    With one inner step the ratio is 1 at the update (on-policy): nothing is clipped or overshoots, and with
    seq_mean_token_mean, advantages that sum to 0 in each group (all but oracle) and no KL term the loss is
    -(1/S) sum_i A_i = 0 (up to rounding). Without kl_beta no reference policy is kept, so ``kl`` is 0. The tabular
    policy's completion is one token (an arm): its length and truncation never change.
    """
    one_token = "a tabular completion is one token"
    flat = dict.fromkeys(("completion_tokens_mean", "truncation_rate"), one_token) if tabular else {}
    if grpo.inner_steps == 1:
        ratio_one = "one optimizer step per batch: the ratio is 1 at the update, so nothing is clipped"
        flat |= dict.fromkeys(("clip_frac_low", "clip_frac_high", "momentum_overshoot_frac"), ratio_one)
        if grpo.kl_beta == 0 and grpo.loss_aggregation == "seq_mean_token_mean" and grpo.advantage != "oracle":
            flat["loss"] = (
                "at ratio 1 with seq_mean_token_mean it is minus the mean advantage, 0 since a group's advantages sum to 0"
            )
    if grpo.kl_beta == 0:
        flat["kl"] = "kl_beta is 0, so no reference policy is kept"
    return flat


KEPT_AT_CHECKPOINTS = ("gap", "gap_se")  # what a trial's result keeps of each eval on the way, as <name>@<step>


def result_metrics(final: dict[str, float], initial: dict[str, float], at: dict[int, dict[str, float]]) -> dict[str, float]:
    """A succeeded trial's result metrics (both engines): the final eval's, the eval before step 1's as
    ``<name>_initial``, and ``at`` (step -> that eval's values) as ``<name>@<step>`` for KEPT_AT_CHECKPOINTS."""
    kept = {f"{k}@{s}": v for s, values in at.items() for k, v in values.items() if k in KEPT_AT_CHECKPOINTS}
    return {**final, **{f"{k}_initial": v for k, v in initial.items()}, **kept}


# What a trial's result keeps of its step metrics, over the steps that reported each: how the steps combine.
SUMMARIZED: dict[str, str] = {"realized_group_size_min": "min", "realized_group_size_max": "max"}
SUMMARIZED |= dict.fromkeys(
    ("frac_groups_identical", "frac_groups_all_wrong", "frac_groups_all_right", "truncation_rate"), "mean"
)


def summarize(summary: dict[str, list[float]], metrics: dict[str, float]) -> None:
    """Fold one step's ``metrics`` into ``summary`` in place: name -> [steps, the min, max or sum so far] for each
    SUMMARIZED name the step has (plain lists: a checkpoint or TRL's trainer_state.json holds it)."""
    fold: dict[str, Callable[[float, float], float]] = {"min": min, "max": max, "mean": operator.add}  # a mean's sum
    for key, how in SUMMARIZED.items():
        if key in metrics:
            steps, acc = summary.get(key, [0, metrics[key]])
            summary[key] = [steps + 1, metrics[key] if not steps else fold[how](acc, metrics[key])]


def summary_metrics(summary: dict[str, list[float]]) -> dict[str, float]:
    """The result metrics of a trial's ``summary`` (summarize): min and max as they are, the others' mean over steps."""
    return {k: acc / steps if SUMMARIZED[k] == "mean" else acc for k, (steps, acc) in summary.items()}


def known(key: str) -> bool:
    """Whether ``key`` is a registered metric (an eval's ``_initial`` and ``@<step>`` forms included)."""
    base = key.split("@")[0].removesuffix("_initial")
    return any(base in table for table in (STEP, EVAL, PROBE, MEASURE)) or key.startswith(tuple(PREFIXES))
