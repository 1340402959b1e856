"""grpo.allocation per_prompt: each prompt's G from the probe's pass-rate table, B completions a step, every prompt
weighted 1/N (workers.per_prompt, algos.per_prompt_advantages; THEORY.md "Per-prompt G")."""

import numpy as np
import pytest
import torch

from workers import algos
from workers.batch import sample_batch, setup
from workers.engines import groupscale
from workers.engines.groupscale import TrialConfig, grpo_update, train_trial
from workers.per_prompt import PerPromptG
from workers.tasks import Problem

TASK = {"name": "bandit", "contexts": 20, "arms": 6, "seed": 0}
TABLE = [{"pass_rate": [0.0, 0.2], "share": 0.5, "group_size": 8}, {"pass_rate": [0.8, 1.0], "share": 0.5, "group_size": 2}]


def _cfg(**over):
    base = dict(task=TASK, model={"preset": "tabular"}, group_size=4, samples_per_step=48, seed=0, steps=6)
    return TrialConfig.flat(**{**base, "allocation": "per_prompt", "optimizer": "sgd", "lr": 0.5, **over})


def test_each_prompt_gets_the_g_of_its_pass_rate_and_the_step_holds_b_exactly():
    alloc = PerPromptG(TABLE, unseen=4)
    hard, easy, middle, new = (Problem(str(i), "") for i in range(4))
    alloc.update([hard, easy, middle], [np.zeros(10), np.ones(10), np.full(10, 0.5)])
    assert [alloc.size(p) for p in (hard, easy, middle, new)] == [8, 2, 4, 4]  # middle: a part the probe saw no prompt in
    problems, sizes = alloc.layout([hard, easy, new, hard, easy, new, hard], 25)
    assert sizes == [8, 2, 4, 8, 3] and sum(sizes) == 25  # the last takes what is left; never a group of 1
    assert problems == [hard, easy, new, hard, easy]
    with pytest.raises(ValueError, match="cannot fill"):
        alloc.layout([hard], 25)
    alloc.update([easy], [np.zeros(30)])  # 10 right of 40: a pass rate of 0.25 now
    assert alloc.size(easy) == 4


def test_per_prompt_advantages_weight_every_prompt_one_over_n():
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])  # G 2, then G 4: m = 3
    adv = algos.per_prompt_advantages(rewards, [2, 4], "loo")
    first = algos.compute_advantages(rewards[:2].view(1, 2), "loo").reshape(-1) * 3 / 2
    second = algos.compute_advantages(rewards[2:].view(1, 4), "loo").reshape(-1) * 3 / 4
    assert torch.allclose(adv, torch.cat([first, second]))
    same = algos.per_prompt_advantages(rewards, [3, 3], "mean_std")
    assert torch.allclose(same, algos.compute_advantages(rewards.view(2, 3), "mean_std").reshape(-1))


def test_a_per_prompt_trial_trains_b_completions_a_step_in_groups_of_the_probes_table(monkeypatch):
    batches = []

    def keeping(*args, **kwargs):
        batches.append(batch := sample_batch(*args, **kwargs))
        return batch

    monkeypatch.setattr(groupscale, "sample_batch", keeping)
    points = []
    result = train_trial(_cfg(), lambda m, s: points.append((s, m)))
    assert result.status == "succeeded", result
    assert [b.rollout.input_ids.shape[0] for b in batches] == [48] * 6 == [sum(b.group_sizes) for b in batches]
    sizes = [g for b in batches[1:] for g in b.group_sizes]
    assert min(sizes) >= 2 and len(set(sizes)) >= 2  # groups of several sizes once pass rates are known
    assert batches[0].group_sizes == [4] * 12  # nothing seen yet: the trial's G
    ratio = [m["per_prompt_mse_ratio"] for s, m in points if "per_prompt_mse_ratio" in m]
    assert ratio and 0.9 < ratio[0] <= 1.0  # the bandit's: 0.993 exact


def test_a_killed_per_prompt_trial_resumes_with_its_pass_rates(tmp_path):
    straight = train_trial(_cfg(steps=6))

    def dies(metrics, step):
        if step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_trial(_cfg(steps=6, checkpoint_dir=str(tmp_path), checkpoint_every=2), dies)
    resumed = train_trial(_cfg(steps=6, checkpoint_dir=str(tmp_path), checkpoint_every=2))
    assert resumed.metrics["gap"] == pytest.approx(straight.metrics["gap"], abs=1e-12)


def test_the_update_of_a_per_prompt_batch_is_the_estimator_of_the_theory_by_hand():
    """One SGD step at lr 1 on the tabular policy moves theta by (1/N) sum_x (1/G_x) sum_j A_j s_j (leave-one-out
    A, s = e_a - pi in row x): THEORY.md's per-prompt estimator, not a mean over the S completions."""
    cfg = _cfg(lr=1.0, max_grad_norm=1e9)
    task, policy, rng = setup(cfg)
    alloc = PerPromptG(TABLE, unseen=3)
    hard = Problem("0", "")
    alloc.update([hard], [np.zeros(16)])  # context 0 gets G 8, every other 3
    before = policy.module.logits.detach().clone()
    batch = sample_batch(policy, task, cfg, rng, 1, [], alloc)
    assert 8 in batch.group_sizes and 3 in batch.group_sizes and sum(batch.group_sizes) == 48
    opt = torch.optim.SGD(policy.module.parameters(), lr=1.0)
    grpo_update(policy, None, opt, batch, cfg)
    pi = torch.softmax(before, dim=-1)
    expected = torch.zeros_like(before)
    row = 0
    for problem, g, r in zip(batch.problems, batch.group_sizes, batch.reward_groups()):
        x = int(problem.prompt)
        arms = batch.rollout.input_ids[row : row + g, 1]
        adv = r - (r.sum() - r) / (g - 1)
        expected[x] += (adv[:, None] * (torch.nn.functional.one_hot(arms, 6) - pi[x])).sum(0) / g / len(batch.problems)
        row += g
    assert torch.allclose(policy.module.logits.detach() - before, expected, atol=1e-6)
