"""The objective options of groupscale's trainer, in trials: grpo.steps_per_generation (k mini-batches per generation,
verl's mini-batches), grpo.importance_sampling_level sequence (GSPO) and the loo_std advantage (NeMo-RL's); the maths
itself is checked by hand in test_algos.py. Also the spec's rule for k and the engine's declaration of it."""

import statistics

import pytest
import torch

import workers.engines.groupscale as trainer
from sweeps.engines import get_engine
from sweeps.spec import SweepSpec
from workers import algos
from workers.checkpoint import load_checkpoint
from workers.engines.groupscale import TrialConfig, train_trial

BANDIT = {"name": "bandit", "contexts": 20, "arms": 6, "seed": 0}


def bandit(**over):
    base = dict(task=BANDIT, model={"preset": "tabular"}, group_size=4, samples_per_step=48, seed=0, steps=8, lr=0.5)
    return TrialConfig.flat(**{**base, **over})


class Watch:
    """Records the trainer's generations (sample_batch: its step, its batch, the policy's log-probs right after it) and
    optimizer steps (_optimizer_step: its rows, the old log-probs it was given and the ratio it saw)."""

    def __init__(self, monkeypatch):
        self.generations, self.steps = [], []
        sample, step = trainer.sample_batch, trainer._optimizer_step

        def sample_batch(policy, task, cfg, rng, at, *rest):
            batch = sample(policy, task, cfg, rng, at, *rest)
            with torch.no_grad():
                self.generations.append((at, batch, policy.logprobs(batch.rollout, cfg.grpo.temperature)))
            return batch

        def optimizer_step(policy, opt, batch, rows, cfg, old_logp, ref_logp):
            ratio, values = step(policy, opt, batch, rows, cfg, old_logp, ref_logp)
            self.steps.append((rows, old_logp, ratio))
            return ratio, values

        monkeypatch.setattr(trainer, "sample_batch", sample_batch)
        monkeypatch.setattr(trainer, "_optimizer_step", optimizer_step)


def run(cfg):
    reports = []
    result = train_trial(cfg, lambda m, s: reports.append((s, m)))
    return result, {s: m for s, m in reports if "reward_mean" in m}


def test_k_4_takes_4_optimizer_steps_per_generation_against_its_old_log_probs(monkeypatch):
    """B = 48, G = 4: 12 prompts a generation, 3 per mini-batch (12 completions), in the order they were sampled; T = 8
    optimizer steps sample 2 generations. Every step's ratio is against the generation's log-probs: 1 at its first
    mini-batch, not 1 at the second (the first step moved the policy)."""
    watch = Watch(monkeypatch)
    result, steps = run(bandit(steps_per_generation=4))
    assert result.status == "succeeded"
    assert [at for at, _, _ in watch.generations] == [1, 5]
    assert [(r.start, r.stop) for r, _, _ in watch.steps] == [(0, 12), (12, 24), (24, 36), (36, 48)] * 2
    for n, (_, old, _) in enumerate(watch.steps):
        assert torch.equal(old, watch.generations[n // 4][2]), n  # the generation's, whole
    assert torch.allclose(watch.steps[0][2], torch.ones(12, 1), atol=1e-6)
    assert (watch.steps[1][2] - 1).abs().max() > 1e-3
    assert sorted(steps) == list(range(1, 9))  # one report per optimizer step, each of its own mini-batch
    for step, m in steps.items():
        rewards = watch.generations[(step - 1) // 4][1].rewards[3 * ((step - 1) % 4) :][:3]
        assert m["reward_mean"] == pytest.approx(float(rewards.mean())), step
        assert (m["time_generate_s"] > 0) == (step in (1, 5)), step
        assert 0 <= m["prompts_with_signal"] <= 3


def test_mu_passes_over_the_k_mini_batches_in_verl_s_order(monkeypatch):
    """inner_steps 2, k 2: the generation's 4 optimizer steps go mini-batch 0, 1, 0, 1 (verl: the epochs outside the
    mini-batches), two per trial step; the momentum overshoot is measured on each step's own rows."""
    watch = Watch(monkeypatch)
    result, steps = run(bandit(steps_per_generation=2, inner_steps=2, steps=4))
    assert result.status == "succeeded" and [at for at, _, _ in watch.generations] == [1, 3]
    assert [(r.start, r.stop) for r, _, _ in watch.steps] == [(0, 24), (24, 48)] * 4
    assert sorted(steps) == [1, 2, 3, 4] and all("momentum_overshoot_frac" in m for m in steps.values())


def test_k_not_dividing_t_trains_part_of_the_last_generation(monkeypatch):
    watch = Watch(monkeypatch)
    result, steps = run(bandit(steps_per_generation=4, steps=5))
    assert result.status == "succeeded" and [at for at, _, _ in watch.generations] == [1, 5] and sorted(steps) == [1, 2, 3, 4, 5]
    spec = SweepSpec.model_validate(SPEC | {"grpo": {"steps_per_generation": 4}})
    assert get_engine("groupscale").sampled(spec, 5, 48) == 2 * 48 and get_engine("groupscale").sampled(spec, 8, 48) == 96


class Killed(BaseException):
    """A worker killed mid-trial (nothing in the trainer catches it)."""


def test_a_trial_killed_inside_a_generation_resumes_from_where_one_ended(tmp_path):
    """k = 2, checkpoint_every 3: checkpoints after step 4 (the generation holding step 3 ends there) and at T = 6.
    Killed at step 5, the trial resumes from 4, samples step 5's generation afresh and ends as the straight one."""
    straight_dir, killed_dir = tmp_path / "straight", tmp_path / "killed"
    straight = train_trial(bandit(steps_per_generation=2, steps=6, checkpoint_every=3, checkpoint_dir=str(straight_dir)))

    def die_at_5(metrics, step):
        if step == 5 and "reward_mean" in metrics:
            raise Killed

    cfg = bandit(steps_per_generation=2, steps=6, checkpoint_every=3, checkpoint_dir=str(killed_dir))
    with pytest.raises(Killed):
        train_trial(cfg, die_at_5)
    assert load_checkpoint(str(killed_dir))["trial"]["step"] == 4
    reports = []
    resumed = train_trial(cfg, lambda m, s: reports.append((s, m)))
    assert [s for s, m in reports if "resumed_from_step" in m] == [4]
    assert [s for s, m in reports if "reward_mean" in m] == [5, 6]
    assert resumed.metrics == pytest.approx(straight.metrics, abs=1e-9)
    ours, theirs = load_checkpoint(str(killed_dir))["model"], load_checkpoint(str(straight_dir))["model"]
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)


def test_two_processes_each_split_their_own_groups_into_the_k_mini_batches(tmp_path):
    """B = 48, G = 4 on 2 processes with k = 2: each rank's 6 groups in 2 mini-batches of 3 (verl's per-rank split);
    the ranks take the same optimizer steps (their parameters never part) and the trial succeeds, sampling twice."""
    from tests.workers.test_distributed import _spawn

    config = bandit(steps_per_generation=2, steps=4, num_processes=2, inner_steps=2, clip_eps=0.05).to_dict()
    assert _spawn(2, config, tmp_path / "k2") == [0, 0]
    params = [torch.load(tmp_path / f"k2.params.{r}") for r in (0, 1)]
    assert all(torch.equal(params[0][k], params[1][k]) for k in params[0])
    result = torch.load(tmp_path / "k2.result.0", weights_only=False)
    assert result["status"] == "succeeded" and result["steps_done"] == 4


def test_sequence_level_ratio_is_one_per_completion_and_clips_whole_completions(model_cache, monkeypatch):
    """Tiny-llama (completions of several tokens), k = 2 so the second mini-batch is off-policy, a narrow clip: every
    log-ratio the loss gets is constant over a completion's tokens, and the clipped share counts whole completions."""
    calls = []
    loss = algos.compute_policy_loss

    def policy_loss(log_ratio, old, adv, mask, eps, eps_high=None):
        out = loss(log_ratio, old, adv, mask, eps, eps_high)
        calls.append((log_ratio.detach(), adv, mask, out[1]))
        return out

    monkeypatch.setattr(algos, "compute_policy_loss", policy_loss)
    lm = dict(task={"name": "arithmetic", "max_operand": 49}, model={"preset": "tiny-llama"}, group_size=4, seed=0)
    lm |= dict(samples_per_step=16, eval_prompts=16, cache_dir=str(model_cache), lr=3e-3, clip_eps=0.002)
    result = train_trial(TrialConfig.flat(**lm, steps=2, steps_per_generation=2, importance_sampling_level="sequence"))
    assert result.status == "succeeded" and len(calls) == 2
    for log_ratio, adv, mask, stats in calls:
        m = mask.bool()
        first = log_ratio[:, :1].expand_as(log_ratio)
        assert torch.equal(log_ratio[m], first[m])  # one ratio per completion
        clipped = ((first[:, 0] > torch.log1p(torch.tensor(0.002))) & (adv > 0)).float()
        assert stats.clip_frac_high == pytest.approx(float((clipped * mask.sum(1)).sum() / mask.sum()))
    assert calls[1][0].abs().max() > 1e-4 and calls[1][3].clip_frac_high + calls[1][3].clip_frac_low > 0
    calls.clear()
    train_trial(TrialConfig.flat(**lm, steps=2, steps_per_generation=2))  # token level: ratios vary inside completions
    log_ratio, _, mask, _ = calls[1]
    assert not torch.equal(log_ratio[mask.bool()], log_ratio[:, :1].expand_as(log_ratio)[mask.bool()])


def test_a_loo_std_trial_trains_on_nemo_rl_s_advantages(monkeypatch):
    watch = Watch(monkeypatch)
    result, _ = run(bandit(advantage="loo_std", steps=3))
    assert result.status == "succeeded"
    for _, batch, _ in watch.generations:
        want = []
        for group in batch.rewards.tolist():
            for i, r in enumerate(group):
                others = group[:i] + group[i + 1 :]
                spread = statistics.stdev(others)
                want.append((r - statistics.mean(others)) / (spread + 1e-6) if spread > 0 else r - statistics.mean(others))
        assert batch.advantages.tolist() == pytest.approx(want, abs=1e-5)


SPEC = {"name": "k", "task": BANDIT, "model": {"preset": "tabular"}, "group_sizes": [2, 4], "samples_per_step": [48]}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (
            {"grpo": {"steps_per_generation": 5}},
            "G=2 at B=48 gives 24 prompts.*5 mini-batches.*allowed for this grid: 1, 2, 3, 4, 6, 12",
        ),
        ({"group_sizes": [16], "grpo": {"steps_per_generation": 2}}, "G=16 at B=48 gives 3 prompts.*allowed for this grid: 1, 3"),
        ({"grpo": {"steps_per_generation": 2, "allocation": "per_prompt"}}, "need grpo.allocation uniform; allowed: 1"),
        ({"grpo": {"steps_per_generation": 2}, "measure": {"kind": "gradient_mse"}}, "measure.kind gradient_mse"),
    ],
)
def test_the_spec_refuses_a_k_that_cannot_split_every_generation_into_whole_groups(over, message):
    with pytest.raises(ValueError, match="grpo.steps_per_generation") as e:
        SweepSpec.model_validate(SPEC | over)
    assert e.match(message)


def test_any_steps_checkpoint_every_and_eval_every_with_k_and_the_engine_s_declaration():
    spec = SweepSpec.model_validate(
        SPEC | {"steps": 7, "checkpoint_every": 3, "eval": {"every": 5}, "grpo": {"steps_per_generation": 4}}
    )
    engine = get_engine("groupscale")
    assert engine.recipe(spec).optimizer_steps_per_generation == 4
    assert engine.step_structure(spec) == [
        "each generation of 48 completions feeds 4 steps, each on a mini-batch of 12 (whole groups, in sampling order)"
    ]
    assert {"clip_frac_low", "clip_frac_high", "loss"}.isdisjoint(engine.flat_metrics(spec))
    assert engine.step_structure(SweepSpec.model_validate(SPEC)) is None
    assert {"clip_frac_low", "loss"} <= set(engine.flat_metrics(SweepSpec.model_validate(SPEC)))
    gspo = SweepSpec.model_validate(SPEC | {"grpo": {"importance_sampling_level": "sequence", "advantage": "loo_std"}})
    assert (gspo.grpo.importance_sampling_level, gspo.grpo.advantage) == ("sequence", "loo_std")
    with pytest.raises(ValueError, match="importance_sampling_level"):
        SweepSpec.model_validate(SPEC | {"grpo": {"importance_sampling_level": "tokens"}})
