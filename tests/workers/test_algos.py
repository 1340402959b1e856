import math

import pytest
import torch

from workers import algos, groups


def test_loo_is_reward_minus_mean_of_others():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5]])
    a = algos.compute_advantages(r, "loo")
    expected = torch.tensor([[1 - 1 / 3, 0 - 2 / 3, 0 - 2 / 3, 1 - 1 / 3], [0.0, 0.0, 0.0, 0.0]])
    assert torch.allclose(a, expected)


def test_mean_is_loo_times_g_minus_one_over_g():
    r = torch.rand(5, 3)
    assert torch.allclose(algos.compute_advantages(r, "mean"), algos.compute_advantages(r, "loo") * 2 / 3)


def test_mean_std_matches_hand_values_and_never_nan():
    r = torch.tensor([[1.0, 0.0], [0.3, 0.3], [0.1 + 0.2, 0.3]])  # last: equal up to rounding
    a = algos.compute_advantages(r, "mean_std")
    # G = 2, rewards (1, 0): mean 0.5, sample std sqrt(0.5) -> +-0.5/0.7071
    assert torch.allclose(a[0], torch.tensor([0.5, -0.5]) / 0.5**0.5)
    assert torch.equal(a[1:], torch.zeros(2, 2))
    assert torch.isfinite(a).all()


def test_loo_std_by_hand_at_g_2_and_3():
    """NeMo-RL's advantage: the others' mean over the others' sample std (+ 1e-6); unscaled where that std is 0."""
    # G = 3, rewards (1, 0, 0): completion 0's others (0, 0) have std 0 -> 1 - 0 = 1, unscaled;
    # completion 1's others (1, 0): mean 0.5, sample std sqrt(0.5) -> (0 - 0.5) / (sqrt(0.5) + 1e-6)
    a = algos.compute_advantages(torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64), "loo_std")
    second = -0.5 / (0.5**0.5 + 1e-6)
    assert a.flatten().tolist() == pytest.approx([1.0, second, second], rel=1e-12)
    # G = 2: one other reward, no sample std (NeMo-RL's 0 x inf -> NaN -> 0): r_i - r_j, never NaN
    two = algos.compute_advantages(torch.tensor([[1.0, 0.0], [0.3, 0.7], [0.5, 0.5]]), "loo_std")
    assert two.flatten().tolist() == pytest.approx([1.0, -1.0, -0.4, 0.4, 0.0, 0.0], abs=1e-7)
    assert algos.compute_advantages(torch.ones(2, 4), "loo_std").abs().sum() == 0


def test_loo_std_against_the_others_mean_and_stdev_with_its_epsilon():
    """Each A_i from statistics.mean and statistics.stdev of the other G - 1 rewards; the spread of the second row
    (1e-4) makes NeMo-RL's epsilon 1e-6 a 1% change."""
    import statistics

    rows = [[1.0, 0.0, 0.5, 0.25], [0.0, 1e-4, 0.0, 2e-4], [0.2, 0.9, 0.4, 0.4], [3.0, -1.0, 0.0, 7.5]]
    a = algos.compute_advantages(torch.tensor(rows, dtype=torch.float64), "loo_std")
    for row, got in zip(rows, a.tolist()):
        for i, r in enumerate(row):
            others = row[:i] + row[i + 1 :]
            want = (r - statistics.mean(others)) / (statistics.stdev(others) + 1e-6)
            assert got[i] == pytest.approx(want, rel=1e-9), (row, i)


def test_loo_std_matches_nemo_rl_s_own_loop_on_random_groups():
    """A transcription of NeMo-RL's per-prompt loop (NVIDIA-NeMo/RL@7ea279a, nemo_rl/algorithms/utils.py
    calculate_baseline_and_std_per_prompt with leave_one_out_baseline=True, then advantage_estimator.py
    GRPOAdvantageEstimator.compute_advantage) against the vectorised (N, G) form, float32 rewards."""
    gen = torch.Generator().manual_seed(3)
    for g in (2, 3, 5, 8):
        rewards = (torch.rand(6, g, generator=gen) > 0.5).float() * torch.rand(6, 1, generator=gen)
        flat, want = rewards.reshape(-1), torch.zeros(6 * g)
        for p in range(6):
            idx = torch.arange(p * g, (p + 1) * g)
            mask_matrix = 1 - torch.eye(g)
            n = torch.tensor(float(g - 1))
            baseline = mask_matrix @ flat[idx] / n
            square = mask_matrix @ flat[idx].pow(2) / n
            std = ((square - baseline.square()) * (n / (n - 1))).sqrt().nan_to_num(0)
            adv = flat[idx] - baseline
            want[idx] = torch.where(std > 0, adv / (std + 1e-6), adv)
        assert torch.allclose(algos.compute_advantages(rewards, "loo_std").reshape(-1), want, atol=1e-5), g


def test_sequence_level_ratio_loss_and_gradient_by_hand():
    """GSPO as TRL computes it: 2 completions, 3 tokens (the second 2 tokens and a pad), eps 0.2, A = (-1, +1).
    log pi/pi_old per token: (0.3, -0.1, 0.1) and (0.5, 0.1 | pad 5.0). Sequence ratios s = exp(mean): e^0.1 = 1.1052
    (inside the clip) and e^0.3 = 1.3499 (above 1.2 with A > 0: clipped, no gradient). Per-token losses -A s:
    1.1052 on each token of completion 0, -1.2 on completion 1's; seq_mean_token_mean: (1.1052 - 1.2) / 2.
    Gradient in completion 0's token log-probs: 1/2 (its weight) x -A (= 1) x s / 3 (d s / d logp_t) each; 0 for 1's."""
    logp = torch.tensor([[0.3, -0.1, 0.1], [0.5, 0.1, 5.0]], dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    adv = torch.tensor([-1.0, 1.0], dtype=torch.float64)

    def loss_of(level):
        log_ratio = algos.compute_log_ratio(logp, torch.zeros_like(logp), mask, level)
        per_token, stats = algos.compute_policy_loss(log_ratio, torch.zeros(()), adv, mask, clip_eps=0.2)
        return algos.aggregate_loss(per_token, mask, "seq_mean_token_mean", 3), stats

    loss, stats = loss_of("sequence")
    s0 = math.exp(0.1)
    assert loss.item() == pytest.approx((s0 - 1.2) / 2, rel=1e-12)
    loss.backward()
    assert logp.grad.flatten().tolist() == pytest.approx([s0 / 6] * 3 + [0.0] * 3, rel=1e-12)
    assert (stats.clip_frac_low, stats.clip_frac_high) == (0.0, pytest.approx(2 / 5))  # completion 1's 2 of 5 tokens
    # token level on the same numbers: token 0 of completion 1 (e^0.5) is clipped, token 1 (e^0.1) is not
    token, token_stats = loss_of("token")
    seq0 = (math.exp(0.3) + math.exp(-0.1) + math.exp(0.1)) / 3
    assert token.item() == pytest.approx((seq0 - (1.2 + math.exp(0.1)) / 2) / 2, rel=1e-12)
    assert token_stats.clip_frac_high == pytest.approx(1 / 5)


def test_sequence_level_ratio_of_one_token_and_of_an_empty_completion():
    logp, old = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]]), torch.tensor([[-1.5, -9.0], [-0.1, -0.2]])
    mask = torch.tensor([[1.0, 0.0], [0.0, 0.0]])  # one token; none (the divisor clamped at 1: 0, not NaN)
    assert algos.compute_log_ratio(logp, old, mask, "sequence").tolist() == [[0.5, 0.5], [0.0, 0.0]]
    assert algos.compute_log_ratio(logp, old, mask, "token").flatten().tolist() == pytest.approx([0.5, 7.0, -0.4, -0.3])
    with pytest.raises(ValueError, match="unknown importance_sampling_level 'seq'; valid: token, sequence"):
        algos.compute_log_ratio(logp, old, mask, "seq")


def test_unknown_estimator_lists_valid_names():
    with pytest.raises(ValueError, match="loo, mean, mean_std"):
        algos.compute_advantages(torch.zeros(2, 2), "ppo")


def test_group_size_one_is_rejected():
    with pytest.raises(ValueError, match="G >= 2"):
        algos.compute_advantages(torch.zeros(3, 1), "loo")


def test_zero_variance_fraction():
    r = torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    assert algos.zero_variance_group_fraction(r) == 0.5


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    loss = torch.randn(6, 5, generator=g)
    mask = torch.ones(6, 5)
    mask[0, 3:] = 0
    mask[2, 1:] = 0
    return loss, mask


def test_loss_aggregations_against_direct_formulas():
    loss, mask = _batch()
    lengths = mask.sum(1)
    token_mean = sum(loss[i, j] for i in range(6) for j in range(5) if mask[i, j]) / mask.sum()
    seq_mean = sum((loss[i] * mask[i]).sum() / lengths[i] for i in range(6)) / 6
    dr_grpo = sum((loss[i] * mask[i]).sum() / 5 for i in range(6)) / 6
    assert torch.isclose(algos.aggregate_loss(loss, mask, "token_mean", 5), token_mean)
    assert torch.isclose(algos.aggregate_loss(loss, mask, "seq_mean_token_mean", 5), seq_mean)
    assert torch.isclose(algos.aggregate_loss(loss, mask, "seq_mean_token_sum_norm", 5), dr_grpo)
    with pytest.raises(ValueError, match="token_mean"):
        algos.aggregate_loss(loss, mask, "sum", 5)


def test_policy_loss_on_policy_is_minus_advantage_and_unclipped():
    logp = torch.randn(4, 3)
    adv = torch.tensor([1.0, -1.0, 0.5, 0.0])
    mask = torch.ones(4, 3)
    loss, stats = algos.compute_policy_loss(logp, logp.detach(), adv, mask, clip_eps=0.2)
    assert torch.allclose(loss, -adv[:, None].expand(4, 3))
    assert stats.clip_frac_low == 0.0 and stats.clip_frac_high == 0.0


def test_policy_loss_clips_outside_the_trust_region():
    old = torch.zeros(2, 1)
    new = torch.log(torch.tensor([[1.5], [0.5]]))  # ratios 1.5 and 0.5
    adv = torch.tensor([1.0, -1.0])
    loss, stats = algos.compute_policy_loss(new, old, adv, torch.ones(2, 1), clip_eps=0.2)
    assert torch.allclose(loss, torch.tensor([[-1.2], [0.8]]))
    assert stats.clip_frac_high == 0.5 and stats.clip_frac_low == 0.5


def test_kl_k3_is_zero_at_equal_policies_and_positive_otherwise():
    lp = torch.randn(3, 4)
    assert torch.allclose(algos.compute_kl_k3(lp, lp), torch.zeros(3, 4))
    assert (algos.compute_kl_k3(lp, lp + 0.3) > 0).all()


def test_oracle_subtracts_the_true_value():
    r = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    a = algos.compute_advantages(r, "oracle", torch.tensor([0.25, 0.9]))
    assert torch.allclose(a, torch.tensor([[0.75, -0.25], [0.1, 0.1]]))
    with pytest.raises(ValueError, match="true values"):
        algos.compute_advantages(r, "oracle")


def test_loo_with_two_completions():
    a = algos.compute_advantages(torch.tensor([[1.0, 0.0], [0.2, 0.2]]), "loo")
    assert torch.equal(a, torch.tensor([[1.0, -1.0], [0.0, 0.0]]))


def _prefix_batch(len0, len1):
    """One group of G = 2 with rewards (1, 0), so loo advantages (+1, -1), sharing the first token."""
    ids = torch.tensor([[5, 7, 0, 0], [5, 8, 9, 9]])
    mask = torch.tensor([[1.0] * len0 + [0.0] * (4 - len0), [1.0] * len1 + [0.0] * (4 - len1)])
    adv = algos.compute_loo_advantages(torch.tensor([[1.0, 0.0]])).reshape(-1)
    return ids, mask, adv


def test_prefix_weight_bias_is_zero_for_token_mean_with_equal_lengths():
    ids, mask, adv = _prefix_batch(2, 2)
    assert algos.prefix_weight_bias(ids, mask, adv, 2, "token_mean", 4) == pytest.approx(0.0, abs=1e-12)
    assert algos.prefix_weight_bias(ids, mask, adv, 2, "seq_mean_token_mean", 4) == pytest.approx(0.0, abs=1e-12)


def test_prefix_weight_bias_of_per_sequence_means_with_unequal_lengths_by_hand():
    """Lengths 2 and 4: seq_mean_token_mean weights each token 1/(S len_i) = 1/4 and 1/8; the shared
    first token gets (1/4 - 1/8) / (1/4 + 1/8) = 1/3. token_mean and Dr. GRPO weight tokens equally: 0."""
    ids, mask, adv = _prefix_batch(2, 4)
    assert algos.prefix_weight_bias(ids, mask, adv, 2, "seq_mean_token_mean", 4) == pytest.approx(1 / 3)
    assert algos.prefix_weight_bias(ids, mask, adv, 2, "token_mean", 4) == pytest.approx(0.0, abs=1e-12)
    assert algos.prefix_weight_bias(ids, mask, adv, 2, "seq_mean_token_sum_norm", 4) == pytest.approx(0.0, abs=1e-12)


def test_prefix_weight_bias_is_none_without_a_shared_prefix():
    ids = torch.tensor([[5, 7], [6, 7]])  # the second token agrees, but its history does not
    mask = torch.ones(2, 2)
    adv = torch.tensor([1.0, -1.0])
    assert algos.prefix_weight_bias(ids, mask, adv, 2, "seq_mean_token_mean", 2) is None


# Hand-computed values (issue 16): each pins a formula where a plausible bug gives another number.


def test_kl_k3_by_hand_has_the_reference_over_the_policy():
    # d = ref_logp - logp = log(0.25 / 0.5) = -log 2: k3 = exp(d) - d - 1 = 0.5 + log 2 - 1
    # (the flipped sign d = +log 2 gives 2 - log 2 - 1 = 0.307 instead)
    logp, ref = torch.log(torch.tensor([[0.5]])), torch.log(torch.tensor([[0.25]]))
    assert algos.compute_kl_k3(logp, ref).item() == pytest.approx(math.log(2) - 0.5, abs=1e-6)


def test_clip_higher_widens_only_the_upper_side():
    # ratios 1.25 (A = +1) and 0.75 (A = -1), eps = 0.2, eps_high = 0.28:
    # 1.25 < 1.28 is not clipped (loss -1.25); 0.75 < 0.8 is (loss -min(-0.75, -0.8) = 0.8)
    old = torch.zeros(2, 1)
    new = torch.log(torch.tensor([[1.25], [0.75]]))
    adv = torch.tensor([1.0, -1.0])
    loss, stats = algos.compute_policy_loss(new, old, adv, torch.ones(2, 1), clip_eps=0.2, clip_eps_high=0.28)
    assert torch.allclose(loss, torch.tensor([[-1.25], [0.8]]))
    assert (stats.clip_frac_low, stats.clip_frac_high) == (0.5, 0.0)
    loss, stats = algos.compute_policy_loss(new, old, adv, torch.ones(2, 1), clip_eps=0.2)  # symmetric: 1.25 clipped
    assert torch.allclose(loss, torch.tensor([[-1.2], [0.8]])) and stats.clip_frac_high == 0.5


def test_clip_fractions_count_completion_tokens_only():
    # two tokens with ratio 1.5 and A = +1; the second is padding: 1 of 1 completion token is clipped
    old = torch.zeros(1, 2)
    new = torch.log(torch.tensor([[1.5, 1.5]]))
    loss, stats = algos.compute_policy_loss(new, old, torch.tensor([1.0]), torch.tensor([[1.0, 0.0]]), clip_eps=0.2)
    assert stats.clip_frac_high == 1.0 and loss[0, 1].item() == 0.0
    _, stats = algos.compute_policy_loss(new, old, torch.tensor([1.0]), torch.tensor([[1.0, 1.0]]), clip_eps=0.3)
    assert stats.clip_frac_high == 1.0  # 1.5 > 1.3 on both tokens


def test_dr_grpo_divides_by_max_new_tokens_not_the_padded_width():
    # lengths 2 and 1 in a batch padded to 3, max_new_tokens 8, loss 1 per token: (2/8 + 1/8) / 2 = 3/16
    loss = torch.ones(2, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert algos.aggregate_loss(loss, mask, "seq_mean_token_sum_norm", 8).item() == pytest.approx(3 / 16)
    assert algos.aggregate_loss(loss, mask, "seq_mean_token_mean", 8).item() == pytest.approx(1.0)
    assert algos.aggregate_loss(loss * torch.tensor([[1.0], [3.0]]), mask, "token_mean", 8).item() == pytest.approx(5 / 3)
    # a micro-batch with the step's totals: its share of the step's loss (2 + 1 tokens of 6, 4 completions)
    assert algos.aggregate_loss(loss, mask, "token_mean", 8, n_seqs=4, n_tokens=6).item() == pytest.approx(0.5)
    assert algos.aggregate_loss(loss, mask, "seq_mean_token_mean", 8, n_seqs=4).item() == pytest.approx(0.5)


def test_clip_active_by_hand_on_both_sides():
    ratio = torch.tensor([[1.3, 0.7, 1.0, 1.25]])
    assert algos.clip_active(ratio, torch.tensor([1.0]), 0.2).tolist() == [[True, False, False, True]]
    assert algos.clip_active(ratio, torch.tensor([-1.0]), 0.2).tolist() == [[False, True, False, False]]
    assert algos.clip_active(ratio, torch.tensor([1.0]), 0.2, 0.28).tolist() == [[True, False, False, False]]
    assert algos.clip_active(ratio, torch.tensor([0.0]), 0.2).tolist() == [[False] * 4]


def test_momentum_overshoot_by_hand_on_a_padded_mask():
    # tokens 0 and 2 were clipped and moved further from 1; token 1 was clipped and moved back;
    # token 3 moved further but was not clipped; token 4 is padding. 2 of 4 completion tokens.
    before = torch.tensor([[1.3, 1.3, 0.7, 1.3, 1.3]])
    after = torch.tensor([[1.4, 1.2, 0.6, 1.5, 1.6]])
    clipped = torch.tensor([[True, True, True, False, True]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    assert algos.compute_momentum_overshoot(before, after, clipped, mask) == pytest.approx(0.5)


def test_mean_std_uses_the_sample_std_at_g_3():
    # rewards (1, 0, 0): mean 1/3, centred (2/3, -1/3, -1/3), sample variance (4/9 + 2/9) / 2 = 1/3
    a = algos.compute_advantages(torch.tensor([[1.0, 0.0, 0.0]]), "mean_std")
    std = (1 / 3) ** 0.5
    assert torch.allclose(a, torch.tensor([[2 / 3, -1 / 3, -1 / 3]]) / std)


# Killers of the survivors of `make mutation` on algos (advantages of magnitude != 1, two groups,
# one-token batches, padding, the floor's scale, messages).


def test_policy_loss_with_an_advantage_that_is_not_plus_or_minus_one():
    # ratio 0.9 inside the clip, A = 0.5: loss -0.45 (ratio / A would give -1.8)
    new, old = torch.log(torch.tensor([[0.9]])), torch.zeros(1, 1)
    loss, _ = algos.compute_policy_loss(new, old, torch.tensor([0.5]), torch.ones(1, 1), clip_eps=0.2)
    assert loss.item() == pytest.approx(-0.45)
    loss, _ = algos.compute_policy_loss(new, old, torch.tensor([-0.5]), torch.ones(1, 1), clip_eps=0.2)
    assert loss.item() == pytest.approx(0.45)  # both branches -0.45 (ratio / A would give -1.8, loss 1.8)
    # ratio 1.5 clipped to 1.2 with A = 0.5: loss -0.6
    loss, _ = algos.compute_policy_loss(torch.log(torch.tensor([[1.5]])), old, torch.tensor([0.5]), torch.ones(1, 1), 0.2)
    assert loss.item() == pytest.approx(-0.6)


def test_clip_fractions_need_the_advantage_s_sign_and_skip_padding():
    old = torch.zeros(1, 3)
    new = torch.log(torch.tensor([[0.7, 1.5, 0.7]]))
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    for adv, low, high in ((0.5, 0.0, 0.5), (0.0, 0.0, 0.0), (-0.5, 0.5, 0.0)):
        _, stats = algos.compute_policy_loss(new, old, torch.tensor([adv]), mask, clip_eps=0.2)
        assert (stats.clip_frac_low, stats.clip_frac_high) == (low, high), adv


def test_token_mean_and_overshoot_of_a_single_token():
    assert algos.aggregate_loss(torch.tensor([[3.0, 9.0]]), torch.tensor([[1.0, 0.0]]), "token_mean", 4).item() == 3.0
    one = torch.ones(1, 1)
    assert algos.compute_momentum_overshoot(one * 1.3, one * 1.4, one.bool(), one) == 1.0


def test_mean_std_works_per_group_and_scales_its_floor_with_the_reward_range():
    r = torch.tensor([[1.0, 0.0], [3.0, 1.0]])  # each group centred and scaled by its own std
    expected = torch.tensor([[1.0, -1.0], [1.0, -1.0]]) / 2**0.5
    assert torch.allclose(algos.compute_advantages(r, "mean_std"), expected)
    tiny = torch.tensor([[0.0, 2e-4]])  # std 1.41e-4: above the floor 1e-4 at range 1 (the default), below 1e-3 at 10
    assert algos.compute_mean_std_advantages(tiny).abs().sum() > 0
    assert algos.compute_mean_std_advantages(tiny, reward_range=10.0).abs().sum() == 0


def test_shape_errors_name_the_expected_shape():
    with pytest.raises(ValueError, match=r"values must be \(N,\) = \(2,\), got \(3,\)"):
        algos.compute_advantages(torch.zeros(2, 3), "oracle", torch.zeros(3))
    with pytest.raises(ValueError, match="valid: token_mean, seq_mean_token_mean, seq_mean_token_sum_norm"):
        algos.aggregate_loss(torch.zeros(1, 1), torch.ones(1, 1), "sum", 1)


def test_prefix_weight_bias_averages_over_two_groups_and_skips_a_group_without_advantage():
    # group 0: G = 2, shared first token, lengths 1 and 3 under seq_mean_token_mean, A = (+0.5, -0.5):
    # weights 1/1 and 1/3 per token (over 2 completions: 1/2 and 1/6) -> net (0.5 - 1/6 * 0.5) / (0.5 + 1/6 * 0.5) = 0.5
    # group 1: the same with A = (-0.5, +0.5): -0.5. group 2: no advantage: skipped. Mean 0.
    ids = torch.tensor([[5, 7, 0], [5, 8, 9]] * 3)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]] * 3)
    adv = torch.tensor([0.5, -0.5, -0.5, 0.5, 0.0, 0.0])
    assert algos.prefix_weight_bias(ids, mask, adv, 2, "seq_mean_token_mean", 3) == pytest.approx(0.0, abs=1e-12)
    first_two = algos.prefix_weight_bias(ids[:2], mask[:2], adv[:2], 2, "seq_mean_token_mean", 3)
    assert first_two == pytest.approx(0.5)
    both_positive = torch.tensor([0.5, -0.5, 0.5, -0.5, 0.0, 0.0])
    assert algos.prefix_weight_bias(ids, mask, both_positive, 2, "seq_mean_token_mean", 3) == pytest.approx(0.5)


def test_group_windows_cut_rows_by_the_configured_sizes():
    assert groups.group_windows(7, [3, 4]) == [slice(0, 3), slice(3, 7)]
    assert groups.group_windows(5, [3, 4]) == [slice(0, 3), slice(3, 5)]  # a row short: the last window
    assert groups.group_windows(2, [3, 4]) == [slice(0, 2), slice(2, 2)]  # an empty window
    assert groups.group_windows(9, [3, 4]) == [slice(0, 3), slice(3, 9)]  # extra rows: the last group's
    with pytest.raises(ValueError, match="one int >= 1 per group"):
        groups.group_windows(4, [4, 0])


def test_realized_group_sizes_show_dropped_merged_repeated_and_extra_rows():
    """Rows name their prompt; groups are the configured windows, each counting its most common prompt's rows."""
    assert groups.realized_group_sizes(list("aaaabbbb"), [4, 4]) == [4, 4]
    assert groups.realized_group_sizes(list("aaabbbb"), [4, 4]) == [3, 3]  # a's last dropped: b's first is in a's window
    assert groups.realized_group_sizes(list("aaaabbb"), [4, 4]) == [4, 3]  # the last completion dropped
    assert groups.realized_group_sizes(list("aabbccdd"), [4, 4]) == [2, 2]  # a grouping key that merges two prompts
    # G^2 completions per prompt (each of the G copies of a prompt sampled G times) where G = 2 was configured
    assert groups.realized_group_sizes(list("aaaabbbb"), [2, 2]) == [2, 4]  # rows beyond the sum: the last group's
    assert groups.realized_group_sizes(list("aaaabbbbb"), [4, 4]) == [4, 5]  # an extra row belongs to the last group
    assert groups.realized_group_sizes(list("aab"), [2, 2, 2]) == [2, 1, 0]  # rows run out: short and empty windows
    assert groups.realized_group_sizes(list("aaabbbbb"), [3, 5]) == [3, 5]  # groups of different sizes


def test_a_realized_size_other_than_the_configured_one_fails_naming_both():
    groups.check_group_sizes([4, 4], [4, 4], 1)
    with pytest.raises(groups.GroupSizeError) as e:
        groups.check_group_sizes([3, 4], [4, 4], 2)
    assert str(e.value) == "realized group size 3 to 4 at step 2, configured G = 4 (the trainer dropped or merged completions)"
    with pytest.raises(groups.GroupSizeError, match="realized group size 5 at step 7, configured G = 4 "):
        groups.check_group_sizes([5], [4], 7)
    with pytest.raises(groups.GroupSizeError, match="realized group size 3 at step 1, configured G = 3 to 5 "):
        groups.check_group_sizes([3, 3], [3, 5], 1)  # groups of different sizes


def test_no_signal_causes_are_a_partition_identical_first():
    rewards = [
        [1.0, 1.0, 1.0],  # identical texts (also all right): identical only
        [0.0, 0.0, 0.0],  # all wrong
        [1.0, 1.0, 1.0],  # all right
        [0.5, 0.5, 0.5],  # constant elsewhere: none of the three
        [0.0, 1.0, 1.0],  # signal
        [0.0, 1.0],  # identical texts with unequal rewards (a group of 2): identical
        [-0.5, -0.5, -0.5],  # all wrong below 0
        [1.0, 1.00005, 1.0],  # equal within STD_FLOOR: all right
    ]
    texts = [["x"] * 3, ["a", "b", "c"], ["a", "b", "c"], ["a", "b", "b"], ["a", "a", "b"], ["y", "y"], ["a", "b", "c"],
             ["a", "b", "c"]]  # fmt: skip
    out = groups.no_signal_causes([torch.tensor(r) for r in rewards], texts)
    assert out == {"frac_groups_identical": 2 / 8, "frac_groups_all_wrong": 2 / 8, "frac_groups_all_right": 2 / 8}
    assert groups.no_signal_causes([], []) == dict.fromkeys(groups.NO_SIGNAL_CAUSES, 0.0)
    assert groups.no_signal_causes([[]], [[]]) == dict.fromkeys(groups.NO_SIGNAL_CAUSES, 0.0)  # an empty group: none
    with pytest.raises(ValueError, match="2 groups of rewards but 1 of texts"):
        groups.no_signal_causes([[0.0], [1.0]], [["a"]])
