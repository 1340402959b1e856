"""Re-applies a fixed list of hand-written bugs (issue 16), one at a time, and checks that the unit tests kill each.

Complements `make mutation` (mutmut's mechanical mutants) with bugs a person plausibly writes: a flipped sign,
an ignored option, a wrong normaliser, a check dropped. Each mutation replaces one text of a source file,
which must occur there exactly once (else the list is stale and the script stops, naming the mutation), runs
pytest on the mutation's test files in a subprocess, and writes the file back byte for byte from the copy
kept in memory, whatever happens (a failure, a timeout, Ctrl-C, SIGTERM). One line per mutation: ``killed``
(with the first failing test; a timeout counts as killed and says so) or ``SURVIVED``; then
``hand_mutations_killed: K/N``. Exit 1 when a mutation survives, 2 on a stale list or a broken test run.

    python tests/mutation/by_hand.py [--only ID ...] [--list] [--timeout SECONDS]

Run from the repository root (the source files and tests are found relative to this file either way).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_DIRS = ("tests/workers/", "tests/sweeps/")  # every test set is a subset of `pytest -m "not slow"` on these
TIMEOUT_S = 600

ALGOS, PROBE, ADAPTIVE, TRAINER = ("workers/algos.py", "workers/probe.py", "sweeps/adaptive.py", "workers/engines/groupscale.py")
ALLOCATION, T_ALLOCATION = "sweeps/allocation.py", "tests/sweeps/test_allocation.py"
CURVE, POINTS, UNIVERSALITY = "sweeps/fit/curve.py", "sweeps/fit/points.py", "sweeps/fit/universality.py"
T_ALGOS, T_LAW, T_PROBE = "tests/workers/test_algos.py", "tests/sweeps/fit/test_law.py", "tests/workers/test_probe.py"
T_ADAPTIVE, T_TRAINER = "tests/sweeps/test_adaptive.py", "tests/workers/test_trainer.py"
T_OBJECTIVES = "tests/workers/test_objectives.py"
ANSWER, RIVALS, ANSWER_COST = "sweeps/answer/combine.py", "sweeps/answer/rivals.py", "sweeps/answer/cost.py"
MATTERS = "sweeps/answer/matters.py"
T_ANSWER, T_ANSWER_RUN, T_VERDICT = "tests/sweeps/test_answer.py", "tests/workers/test_answer.py", "tests/sweeps/test_verdict.py"
DRIFT, PAIRED, T_DRIFT, T_PAIRED = (
    "sweeps/answer/drift.py",
    "sweeps/fit/paired.py",
    "tests/sweeps/test_drift.py",
    "tests/sweeps/fit/test_paired.py",
)


@dataclass(frozen=True)
class Mutation:
    """One hand mutation: ``old`` (exactly once in ``path``) becomes ``new``; ``tests`` must then fail."""

    id: str
    path: str
    old: str
    new: str
    description: str
    tests: tuple[str, ...]


MUTATIONS: tuple[Mutation, ...] = (
    # workers/algos.py
    Mutation(
        "kl_k3_sign",
        ALGOS,
        "    d = ref_logp - logp\n",
        "    d = logp - ref_logp\n",
        "the k3 KL estimator's sign flipped: d = logp - ref_logp (estimates KL(pi_ref || pi))",
        (T_ALGOS,),
    ),
    Mutation(
        "clip_eps_high_ignored",
        ALGOS,
        "clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + eps_high) * adv",
        "clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv",
        "clip_eps_high ignored: the upper clip of the PPO loss uses clip_eps",
        (T_ALGOS,),
    ),
    Mutation(
        "dr_grpo_padded_width",
        ALGOS,
        ".sum(dim=1) / float(max_new_tokens)).sum() / n_seqs",
        ".sum(dim=1) / float(mask.shape[-1])).sum() / n_seqs",
        "Dr. GRPO's token sum divided by the padded completion width mask.shape[-1] instead of max_new_tokens",
        (T_ALGOS,),
    ),
    Mutation(
        "clip_active_sign",
        ALGOS,
        "return ((ratio > 1.0 + eps_high) & (adv > 0)) | ((ratio < 1.0 - clip_eps) & (adv < 0))",
        "return ((ratio > 1.0 + eps_high) & (adv < 0)) | ((ratio < 1.0 - clip_eps) & (adv > 0))",
        "clip_active's advantage signs swapped: the upper clip counted for A < 0, the lower for A > 0",
        (T_ALGOS,),
    ),
    Mutation(
        "momentum_overshoot_sign",
        ALGOS,
        "further = (ratio_after - 1.0).abs() > (ratio_before - 1.0).abs()",
        "further = (ratio_after - 1.0).abs() < (ratio_before - 1.0).abs()",
        "the momentum overshoot counts clipped tokens that moved back towards ratio 1, not further out",
        (T_ALGOS,),
    ),
    # the objective options of groupscale's trainer (grpo.steps_per_generation, importance_sampling_level, loo_std)
    Mutation(
        "sequence_ratio_is_token",
        ALGOS,
        '    "sequence": _sequence_log_ratio,',
        '    "sequence": _token_log_ratio,',
        "importance_sampling_level sequence (GSPO) computes the token-level ratio",
        (T_ALGOS, T_OBJECTIVES),
    ),
    Mutation(
        "loo_std_is_mean_std",
        ALGOS,
        '    "loo_std": compute_loo_std_advantages,',
        '    "loo_std": compute_mean_std_advantages,',
        "the loo_std advantage (NeMo-RL's) is GRPO's mean_std: the group's own mean and std, not the others'",
        (T_ALGOS, T_OBJECTIVES),
    ),
    Mutation(
        "mini_batches_ignored",
        TRAINER,
        "grpo_update(policy, ref, opt, gen.batch, cfg, gen.plans[i], gen.old_logp)",
        "grpo_update(policy, ref, opt, gen.batch, cfg)",
        "grpo.steps_per_generation's mini-batches ignored: each of the k steps trains the whole generation on-policy",
        (T_OBJECTIVES,),
    ),
    # sweeps/fit/
    Mutation(
        "universality_never_rejects",
        UNIVERSALITY,
        "rejected=p < ALPHA,",
        "rejected=False,",
        "the F-test of one G* across budgets can never reject (rejected=False whatever p)",
        (T_LAW,),
    ),
    Mutation(
        "recommendation_rounds_g_star",
        CURVE,
        "return min(candidates, key=lambda g: (g + rho / (g - 1.0), g))",
        "return round(g_star)",
        "the recommendation rounds G* instead of choosing among the candidates (divisors of B): 5 for B = 48",
        (T_LAW,),
    ),
    Mutation(
        "three_distinct_g_accepted",
        POINTS,
        "if pts.g.size < N_PARAMS + 1:",
        "if pts.g.size < 3:",
        "a budget with 3 distinct G is fitted (the N_PARAMS + 1 = 4 minimum lowered to 3: no residual dof)",
        (T_LAW,),
    ),
    # workers/probe.py
    Mutation(
        "tau2_cross_term_dropped",
        PROBE,
        "tau2=float(g2.mean() - cross)",
        "tau2=float(g2.mean())",
        "tau2 without its cross term: E_x||g_x||^2 instead of E_x||g_x||^2 - ||E_x g_x||^2",
        (T_PROBE,),
    ),
    Mutation(
        "count_sketch_unsigned",
        "workers/sketch.py",
        "self.sign = torch.randint(0, 2, (n_params,), generator=g, dtype=torch.int8).mul_(2).sub_(1)",
        "self.sign = torch.ones(n_params, dtype=torch.int8)",
        "a count sketch without random signs (all +1): inner products biased by the bucket collisions",
        (T_PROBE,),
    ),
    Mutation(
        "bootstrap_skips_last_prompt",
        PROBE,
        "np.sort([combine(stats, rng.integers(0, k, k))",
        "np.sort([combine(stats, rng.integers(0, k - 1, k))",
        "the probe's bootstrap never draws the last prompt (rng.integers(0, k - 1, k))",
        (T_PROBE,),
    ),
    Mutation(
        "interval_50_percent",
        PROBE,
        "seed: int, level: float = 0.95) -> tuple[float, float]:",
        "seed: int, level: float = 0.5) -> tuple[float, float]:",
        "the probe's bootstrap interval at 50% (percentiles 25/75) instead of 95%",
        (T_PROBE,),
    ),
    # sweeps/adaptive.py
    Mutation(
        "g_star_gradient_flipped",
        ADAPTIVE,
        "grad = np.array([0.0, -math.sqrt(c) / (2 * b**1.5), 1.0 / (2 * math.sqrt(b * c))])",
        "grad = np.array([0.0, math.sqrt(c) / (2 * b**1.5), 1.0 / (2 * math.sqrt(b * c))])",
        "the gradient of G* in b with the wrong sign (+sqrt(c) / (2 b^1.5)): G* seems to grow with the slope b",
        (T_ADAPTIVE,),
    ),
    Mutation(
        "trials_in_flight_ignored",
        ADAPTIVE,
        "rows, pending = list(rows), list(pending)",
        "rows, pending = list(rows), []",
        "next_point ignores the trials in flight: parallel asks repeat the same point",
        (T_ADAPTIVE,),
    ),
    Mutation(
        "stopping_width_at_tolerance",
        ADAPTIVE,
        "if width > tol * fit.g_star:",
        "if width >= tol * fit.g_star:",
        "the stopping rule off by one: an interval exactly tolerance x G* wide does not stop the search",
        (T_ADAPTIVE,),
    ),
    Mutation(
        "initial_design_point_dropped",
        ADAPTIVE,
        "return [(g, b) for g in order for b in spec.samples_per_step]",
        "return [(g, b) for g in order[:-1] for b in spec.samples_per_step]",
        "the initial design drops its last (innermost) G: one distinct G fewer than initial_points",
        (T_ADAPTIVE,),
    ),
    Mutation(
        "proposes_outside_the_grid",
        ADAPTIVE,
        "fresh = [g for g in spec.group_sizes if g not in run]",
        "fresh = [g for g in range(min(spec.group_sizes), max(spec.group_sizes) + 1) if g not in run]",
        "space filling proposes any integer G between the grid's edges, not only the allowed group_sizes",
        (T_ADAPTIVE,),
    ),
    Mutation(
        "information_weight_is_the_variance",
        ADAPTIVE,
        "m = sum((np.outer(x(gg), x(gg)) / v(gg) for gg in g), np.zeros((3, 3)))",
        "m = sum((np.outer(x(gg), x(gg)) * v(gg) for gg in g), np.zeros((3, 3)))",
        "the information matrix weights each trial by its noise variance v instead of 1 / v",
        (T_ADAPTIVE,),
    ),
    Mutation(
        "budgets_combined_by_variance",
        ADAPTIVE,
        "others = sum(1.0 / base[k] for k in terms if k != b)",
        "others = sum(base[k] for k in terms if k != b)",
        "across budgets the other budgets' Var(G*) are added where their precisions 1 / Var_k belong (wrong normaliser)",
        (T_ADAPTIVE,),
    ),
    Mutation(
        "design_shape_g_for_g_minus_1",
        ADAPTIVE,
        "x = lambda gg: np.array([1.0, gg, 1.0 / (gg - 1.0)])",
        "x = lambda gg: np.array([1.0, gg, 1.0 / gg])",
        "the design's regressors use 1/G for the law's 1/(G - 1)",
        (T_ADAPTIVE,),
    ),
    Mutation(
        "information_ignores_the_budget",
        ADAPTIVE,
        "g = [float(r[0]) for r in rows if r[1] == budget] + ",
        "g = [float(r[0]) for r in rows] + ",
        "the information matrix of a budget counts the completed trials of every budget",
        (T_ADAPTIVE,),
    ),
    # sweeps/answer/
    Mutation(
        "passrate_without_1_minus_p",
        RIVALS,
        "need = 1.0 / (8.0 * epsilon * p * (1.0 - p))",
        "need = 1.0 / (8.0 * epsilon * p)",
        "the pass-rate rule without its (1 - p) factor",
        (T_ANSWER,),
    ),
    Mutation(
        "regret_sign",
        RIVALS,
        "return [float(law_curve(g, a, b, c) - law_curve(versus, a, b, c)) for g in group_sizes]",
        "return [float(law_curve(versus, a, b, c) - law_curve(g, a, b, c)) for g in group_sizes]",
        "regret measured the other way round (the recommended G's metric minus the other's)",
        (T_ANSWER,),
    ),
    Mutation(
        "interval_intersection",
        ANSWER,
        "lo = min(sp.lo for sp in spans)",
        "lo = max(sp.lo for sp in spans)",
        "the answer's interval from the pieces' intersection instead of their hull (too narrow to be honest)",
        (T_ANSWER,),
    ),
    Mutation(
        "halving_cost_no_halving",
        ANSWER_COST,
        "before, survivors = length, max(1, survivors // 2)",
        "before, survivors = length, survivors",
        "the halving's cost counts every G on every rung (plans too short a first rung)",
        (T_ANSWER,),
    ),
    Mutation(
        "halving_cost_first_eval_dropped",
        ANSWER_COST,
        "return trial_cost(spec, length - before, b, 1 + (1 if before == 0 else 0), eval_prompts)",
        "return trial_cost(spec, length - before, b, 1, eval_prompts)",
        "the eval before step 1 of the first rung not counted (the answer could spend past its budget)",
        (T_ANSWER,),
    ),
    Mutation(
        "birge_ratio_without_the_root",
        "sweeps/fit/bootstrap.py",
        "return math.sqrt(rss / dof) if dof > 0 and rss > dof else 1.0",
        "return rss / dof if dof > 0 and rss > dof else 1.0",
        "the seeds' noise scaled by chi^2 / dof, a variance ratio, for its root",
        ("tests/sweeps/fit/test_bootstrap.py",),
    ),
    Mutation(
        "baseline_moves_on_the_upper_end",
        "sweeps/answer/baseline.py",
        "if gain.ci95 is not None and gain.ci95[0] > 0:",
        "if gain.ci95 is not None and gain.ci95[1] > 0:",
        "the user's G left whenever the move might pay (the gain's upper end above 0), not when it measurably does",
        (T_ANSWER,),
    ),
    Mutation(
        "baseline_law_gain_sign",
        "sweeps/answer/baseline.py",
        "x * (1.0 / (base - 1.0) - 1.0 / (move - 1.0))",
        "x * (1.0 / (move - 1.0) - 1.0 / (base - 1.0))",
        "the small-group term of the law's gain with its sign flipped (a move judged on the wrong side of G*)",
        ("tests/sweeps/test_baseline.py",),
    ),
    Mutation(
        "baseline_modelled_move_at_the_lower_end_only",
        "sweeps/answer/baseline.py",
        "min(law_gain(base, r, lo), law_gain(base, r, hi))",
        "law_gain(base, r, lo)",
        "a modelled move judged at the interval's lower end only (it must pay for every G* in the interval)",
        ("tests/sweeps/test_baseline.py",),
    ),
    Mutation(
        "answer_cost_leaves_out_resampling",
        "workers/answers/stages.py",
        'spent += plan.pilot.cost + pilot["resampled"]',
        "spent += plan.pilot.cost",
        "the pilot's completions sampled again under dynamic sampling left out of the answer's cost",
        (T_ANSWER_RUN,),
    ),
    Mutation(
        "dynamic_sampling_keeps_silent_groups",
        "workers/dynamic_sampling.py",
        "take = informative_groups(batch.rewards).nonzero()",
        "take = torch.ones_like(informative_groups(batch.rewards)).nonzero()",
        "the engine's dynamic sampling keeps the groups whose rewards are all equal (no filter at all)",
        ("tests/workers/test_dynamic_sampling.py",),
    ),
    Mutation(
        "token_budget_without_carry",
        "workers/token_budget.py",
        "debt = (self.generations + 1) * self.steps_per_generation * self.tokens_per_step - self.spent",
        "debt = self.steps_per_generation * self.tokens_per_step",
        "the token budget's controller sizing each generation for k Z alone, without the spend carried over",
        ("tests/workers/test_token_budget.py",),
    ),
    Mutation(
        "token_budget_lengths_over_all_generations",
        "workers/token_budget.py",
        "self.last_length = tokens / max(completions, 1.0)",
        "self.last_length = self.spent / max(self.generations * completions, 1.0)",
        "the token budget's lbar taken over the whole trial (per generation's completions) rather than the last generation",
        ("tests/workers/test_token_budget.py",),
    ),
    Mutation(
        "answer_pilot_keeps_the_whole_token_budget",
        "workers/answers/stages.py",
        "        tokens_per_step=at_budget(base, pilot.samples_per_step),\n",
        "",
        "an answer's pilot at a share of B kept the spec's whole token budget (it would underspend at its cap)",
        ("tests/workers/test_token_budget.py",),
    ),
    Mutation(
        "dynamic_sampling_share_at_g_2",
        "sweeps/dynamic_sampling.py",
        "p**g + (1.0 - p) ** g",
        "p**2.0 + (1.0 - p) ** 2.0",
        "dynamic sampling's informative share q taken at G = 2 for every G (issue 55's planted bug)",
        ("tests/sweeps/test_dynamic_sampling.py",),
    ),
    Mutation(
        "all_equal_share_plug_in",
        "sweeps/dynamic_sampling.py",
        "np.where(g <= m, exact, ",
        "np.where(g < 0, exact, ",
        "the probe's all-equal share by the plug-in (k / M)^G at every G, not the U-statistic C(k, G) / C(M, G)",
        ("tests/sweeps/test_dynamic_sampling.py",),
    ),
    Mutation(
        "trained_cost_mse_q_for_1_minus_q",
        "sweeps/dynamic_sampling.py",
        "q = 1.0 - all_equal.mean(axis=0)",
        "q = all_equal.mean(axis=0)",
        "the informative share q read as the all-equal share",
        ("tests/sweeps/test_dynamic_sampling.py",),
    ),
    Mutation(
        "filtered_move_at_half_the_resamples",
        "sweeps/answer/baseline.py",
        "filtered >= 1.0 - ONE_SIDED",
        "filtered >= 0.5",
        "under dynamic sampling a move when half the probe's resamples favour it, not 97.5%",
        ("tests/sweeps/test_baseline.py",),
    ),
    Mutation(
        "dynamic_sampling_count_term_sign",
        "sweeps/dynamic_sampling.py",
        "(q * self.law(g) - (1.0 - q) * g * self.grad_norm2) / samples_per_step",
        "(q * self.law(g) + (1.0 - q) * g * self.grad_norm2) / samples_per_step",
        "the filtered step's MSE with the count term's sign flipped (a ratio estimator's covariance term)",
        ("tests/sweeps/test_dynamic_sampling.py",),
    ),
    Mutation(
        "regret_floor_ddof",
        RIVALS,
        "(g.size - 3)",
        "(g.size - 2)",
        "the regret's noise floor with N - 2 residual degrees of freedom for the law's 3 parameters",
        (T_ANSWER,),
    ),
    Mutation(
        "regret_floor_versus_row_dropped",
        RIVALS,
        "- design(np.array([float(versus)]))",
        "- 0.0",
        "the regret's noise floor of metric(G) alone, not of the difference metric(G) - metric(versus)",
        (T_ANSWER,),
    ),
    Mutation(
        "g_matters_inverted",
        MATTERS,
        'if first_fit.evidence != "none":\n        return True, shown\n    if scale <= 0:',
        'if first_fit.evidence == "none":\n        return True, shown\n    if scale <= 0:',
        "'G matters' read from the F-test the wrong way round",
        (T_ANSWER,),
    ),
    Mutation(
        "g_barely_matters_from_any_rung",
        MATTERS,
        "if length < MATTERS_MIN_SHARE * full:",
        "if length < 0:",
        "'G barely matters' said from a rung too short to see it",
        (T_ANSWER_RUN,),
    ),
    Mutation(
        "g_barely_matters_bound_one_sided",
        MATTERS,
        "+ max(0.0, max(-ci[0] for ci in ends))",
        "",
        "the spread's bound from above the rung's best G only (curve(r) - min curve left out: r need not be the best)",
        (T_ANSWER,),
    ),
    Mutation(
        "g_barely_matters_scale_from_zero",
        MATTERS,
        "abs(level - initial) if initial is not None else abs(level)",
        "abs(level)",
        "the metric's scale taken as its level, not how far training moved it",
        (T_ANSWER,),
    ),
    Mutation(
        "disagreeing_stages_stay_strong",
        ANSWER,
        "weak = [disagree] if disagree else []",
        "weak = []",
        "stages that disagree (start probe against later evidence) still allow strong evidence",
        (T_ANSWER,),
    ),
    Mutation(
        "drift_prediction_without_the_leverage_square",
        DRIFT,
        "(1.0 - x.mean()) ** 2 / sxx",
        "(1.0 - x.mean()) / sxx",
        "the prediction interval's leverage term not squared (too narrow far from the pilot's steps)",
        (T_DRIFT,),
    ),
    Mutation(
        "paired_without_holm",
        PAIRED,
        "running = max(running, min(1.0, (m - i) * p))",
        "running = max(running, min(1.0, p))",
        "the paired comparisons not adjusted for their number (Holm)",
        (T_PAIRED,),
    ),
    Mutation(
        "paired_sd_ddof_0",
        PAIRED,
        "sd = float(d.std(ddof=1))",
        "sd = float(d.std())",
        "the paired differences' sd with ddof 0 (too small: t too large)",
        (T_PAIRED,),
    ),
    # workers/engines/groupscale.py
    Mutation(
        "non_finite_check_removed",
        TRAINER,
        "bad = [k for k, v in values.items() if not math.isfinite(v)]",
        "bad = []",
        "the trainer's check for a non-finite loss, KL or gradient norm removed",
        (T_TRAINER,),
    ),
    # per-prompt G (issue 43): sweeps/allocation.py, the probe's per-prompt terms, the trainer's weights and checks
    Mutation(
        "per_prompt_variance_g_for_g_minus_1",
        ALLOCATION,
        "return c.sigma2 / sizes + c.kappa / (sizes * (sizes - 1))",
        "return c.sigma2 / sizes + c.kappa / (sizes * sizes)",
        "a prompt's leave-one-out excess kappa / (G (G - 1)) written kappa / G^2",
        (T_ALLOCATION,),
    ),
    Mutation(
        "per_prompt_marginal_wrong",
        ALLOCATION,
        "return c.sigma2 / g**2 + c.kappa * (2 * g - 1) / (g**2 * (g - 1) ** 2)",
        "return c.sigma2 / g**2 + c.kappa * (2 * g - 1) / (g**2 * (g - 1))",
        "the marginal variance's kappa term with (G - 1) for (G - 1)^2: the optimum's marginals are not equal",
        (T_ALLOCATION,),
    ),
    Mutation(
        "per_prompt_kappa_estimate",
        PROBE,
        "        2 * np.array(z2) - 4 * np.array(z1),\n",
        "        2 * np.array(z2) - 2 * np.array(z1),\n",
        "the probe's per-prompt kappa_x = 2 zeta2 - 2 zeta1 (for 4 zeta1)",
        ("tests/workers/test_bandit.py",),
    ),
    Mutation(
        "per_prompt_weights_dropped",
        ALGOS,
        "        out[rows] = adv.reshape(-1) * (mean_size / g)\n",
        "        out[rows] = adv.reshape(-1)\n",
        "per-prompt advantages without the m / G_x weight: prompts weighted by their G, not 1/N",
        ("tests/workers/test_per_prompt.py",),
    ),
    Mutation(
        "realized_group_size_check_dropped",
        "workers/groups.py",
        "    if list(realized) != list(sizes):\n",
        "    if False:\n",
        "a trial whose groups were cut trains on (the realized-G check dropped)",
        (T_ALGOS, T_TRAINER),
    ),
    Mutation(
        "sampler_ignores_temperature",
        "workers/decode.py",
        ".div_(temperature)",
        "",
        "generation samples at temperature 1 whatever the spec's temperature",
        ("tests/workers/test_rollout.py",),
    ),
    Mutation(
        "sampler_without_the_total",
        "workers/decode.py",
        "u[:, 1:] * inner[:, -1:]",
        "u[:, 1:] * 0.5 * inner[:, -1:]",
        "the sampler's second uniform on half the block's total: the block's later tokens never drawn",
        ("tests/workers/test_rollout.py",),
    ),
    Mutation(
        "sampler_one_uniform_for_both_stages",
        "workers/decode.py",
        "u[:, 1:] * inner[:, -1:]",
        "u[:, :1] * inner[:, -1:]",
        "the sampler's block and token within it drawn with one uniform: a block's first tokens drawn more often",
        ("tests/workers/test_rollout.py",),
    ),
    Mutation(
        "decode_position_off_by_one",
        "workers/decode.py",
        "position_ids=att.long().sum(dim=1, keepdim=True) - 1,",
        "position_ids=att.long().sum(dim=1, keepdim=True),",
        "the decode loop's new token one position past its place (RoPE): later tokens from another distribution",
        ("tests/workers/test_rollout.py",),
    ),
    Mutation(
        "sketch_sides_transposed",
        "workers/sketch.py",
        "        left = rows.rows(go.reshape(n * t, -1), self.dim).reshape(n, t, -1)\n"
        "        self._convolve(out, left, cols.rows(x.reshape(n * t, -1), self.dim).reshape(n, t, -1))\n",
        "        left = cols.rows(go.reshape(n * t, -1), self.dim).reshape(n, t, -1)\n"
        "        self._convolve(out, left, rows.rows(x.reshape(n * t, -1), self.dim).reshape(n, t, -1))\n",
        "the TensorSketch of a Linear's gradient with the input side's hash on the output gradient and back",
        ("tests/workers/test_sketch.py",),
    ),
    Mutation(
        "sketch_token_sum_after_product",
        "workers/sketch.py",
        "spectrum = (torch.fft.rfft(left, dim=-1) * torch.fft.rfft(right, dim=-1)).sum(dim=1)",
        "spectrum = torch.fft.rfft(left.sum(dim=1), dim=-1) * torch.fft.rfft(right.sum(dim=1), dim=-1)",
        "the per-example sketch with each side summed over tokens before the product (sum_t u_t * sum_t v_t)",
        ("tests/workers/test_sketch.py",),
    ),
    Mutation(
        "sketch_leaves_parameters_frozen",
        "workers/scores.py",
        "        for p in frozen:\n            p.requires_grad_(True)\n",
        "        pass\n",
        "the probe's backward pass leaves the model's parameters frozen (training after a probe_during_training)",
        ("tests/workers/test_sketch.py",),
    ),
)


def check(mutations: tuple[Mutation, ...]) -> list[str]:
    """Every problem of the list (stale or malformed entries), each naming its mutation; empty when it is sound."""
    problems, seen = [], set()
    for m in mutations:
        if m.id in seen:
            problems.append(f"{m.id}: duplicate id")
        seen.add(m.id)
        source = ROOT / m.path
        if not source.is_file():
            problems.append(f"{m.id}: no file {m.path}")
            continue
        count = source.read_text(encoding="utf-8").count(m.old)
        if count != 1:
            problems.append(f"{m.id}: the old text occurs {count} times in {m.path}, not exactly once: {m.old!r}")
        if m.old == m.new:
            problems.append(f"{m.id}: the new text is the old one")
        if not m.tests:
            problems.append(f"{m.id}: no tests")
        for t in m.tests:
            if not t.startswith(TEST_DIRS) or not (ROOT / t).is_file():
                problems.append(f"{m.id}: test file {t} is not a file under {' or '.join(TEST_DIRS)}")
    return problems


def run_tests(tests: tuple[str, ...], timeout: float) -> tuple[int | None, str]:
    """(pytest's exit status, or None after ``timeout`` seconds; its output) on ``tests`` in a fresh interpreter.

    No bytecode is written, so no .pyc of a mutated source can outlive the mutation; the run has its own
    session, and the whole of it is killed on a timeout or when this script is interrupted.
    """
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-m", "not slow", "-p", "no:cacheprovider", *tests]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        return None, ""
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def first_failure(output: str) -> str:
    """The node id of the first FAILED or ERROR line of pytest's summary ("?" when there is none)."""
    for line in output.splitlines():
        for tag in ("FAILED ", "ERROR "):
            if line.startswith(tag):
                return line[len(tag) :].split(" - ", 1)[0].strip()
    return "?"


def apply_and_test(m: Mutation, timeout: float) -> tuple[bool, str]:
    """(killed, detail) of one mutation; the source file is restored byte for byte (and its times) in any case."""
    source = ROOT / m.path
    original = source.read_bytes()
    times = source.stat()
    text = original.decode("utf-8")
    if text.count(m.old) != 1:  # the file changed since check()
        raise SystemExit(f"{m.id}: the old text does not occur exactly once in {m.path}")
    try:
        source.write_bytes(text.replace(m.old, m.new, 1).encode("utf-8"))
        rc, out = run_tests(m.tests, timeout)
    finally:
        source.write_bytes(original)
        os.utime(source, ns=(times.st_atime_ns, times.st_mtime_ns))
    if source.read_bytes() != original:  # pragma: no cover - a guard, never expected
        raise SystemExit(f"{m.id}: {m.path} was not restored")
    if rc is None:
        return True, f"timeout after {timeout:g} s"
    if rc == 0:
        return False, ""
    if rc in (1, 2):  # tests failed, or collection / import failed (a mutant that breaks the import is killed)
        return True, first_failure(out)
    tail = "\n".join(out.splitlines()[-20:])
    raise SystemExit(f"{m.id}: pytest exited with {rc} (not a test failure: a usage error or no tests collected)\n{tail}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these mutations")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help=f"seconds per test run (default {TIMEOUT_S})")
    args = parser.parse_args(argv)
    problems = check(MUTATIONS)
    if problems:
        print("the mutation list is stale:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    ids = [m.id for m in MUTATIONS]
    unknown = [i for i in args.only or [] if i not in ids]
    if unknown:
        print(f"unknown mutation id(s): {', '.join(unknown)}; valid: {', '.join(ids)}", file=sys.stderr)
        return 2
    chosen = [m for m in MUTATIONS if not args.only or m.id in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.id:36s} {m.path:20s} {m.description}  [{' '.join(m.tests)}]")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # SystemExit: the finally blocks restore the source
    killed, start = 0, time.perf_counter()
    for m in chosen:
        t0 = time.perf_counter()
        ok, detail = apply_and_test(m, args.timeout)
        killed += ok
        status = "killed  " if ok else "SURVIVED"
        where = f"  [{detail}]" if detail else f"  [tests: {' '.join(m.tests)}]"
        print(f"{status} {m.id:36s} {m.path:20s} {m.description}{where} ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"wall time {time.perf_counter() - start:.0f} s")
    print(f"hand_mutations_killed: {killed}/{len(chosen)}")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
