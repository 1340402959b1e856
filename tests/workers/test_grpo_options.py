"""GRPO options and trial mechanics on the tiny preset: clipping, reward scale, checkpoints, data and models."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sweeps.spec import SweepSpec
from workers.checkpoint import load_checkpoint
from workers.engines.groupscale import TrialConfig, train_trial
from workers.models.loading import load_lm, load_policy
from workers.models.presets import build_char_tokenizer, tiny_llama
from workers.tasks import make_task

TASK = {"name": "arithmetic", "max_operand": 49}


def cfg(cache, **over):
    base = dict(
        task=TASK,
        model={"preset": "tiny-llama"},
        group_size=4,
        samples_per_step=32,
        seed=0,
        steps=20,
        eval_prompts=128,
        cache_dir=str(cache),
    )
    return TrialConfig.flat(**{**base, **over})


def run(config):
    reports = []
    result = train_trial(config, lambda m, s: reports.append((s, m)))
    return result, [m for _, m in reports if "reward_mean" in m]


def test_several_inner_steps_clip_and_show_momentum_overshoot(model_cache):
    result, steps = run(cfg(model_cache, inner_steps=4, lr=1e-3, steps=8))
    assert result.status == "succeeded"
    assert max(m["clip_frac_low"] + m["clip_frac_high"] for m in steps) > 0
    assert max(m["momentum_overshoot_frac"] for m in steps) > 0
    for m in steps:
        assert m["entropy"] > 0 and 0 <= m["prompts_with_signal"] <= 8


def test_what_one_inner_step_makes_constant_is_constant_and_not_logged(model_cache, monkeypatch):
    """sweeps.metrics.flat_by_construction's claim, measured on the update's own statistics: with one inner step,
    seq_mean_token_mean, loo and no kl_beta nothing clips or overshoots, kl is 0 and the loss is 0 up to rounding;
    those charts are not logged. With token_mean the loss weighs advantages by length, so it is logged."""
    import workers.engines.groupscale as trainer

    stats = []
    update = trainer.grpo_update
    monkeypatch.setattr(trainer, "grpo_update", lambda *a: stats.append(update(*a)) or stats[-1])
    _, steps = run(cfg(model_cache, steps=5))
    flat = {"clip_frac_low", "clip_frac_high", "momentum_overshoot_frac", "kl", "loss"}
    assert len(stats) == 5 and all(s.clip_frac_low == s.clip_frac_high == s.momentum_overshoot_frac == s.kl == 0 for s in stats)
    assert max(abs(s.loss) for s in stats) < 1e-6 < min(s.grad_norm for s in stats)
    assert len(steps) == 5 and not flat & {k for m in steps for k in m} and all(m["entropy"] > 0 for m in steps)
    _, token_mean = run(cfg(model_cache, steps=2, loss_aggregation="token_mean"))
    assert all("loss" in m and "kl" not in m and "clip_frac_low" not in m for m in token_mean)


def trajectory(cache, optimizer, lr, scale, steps=20):
    """Parameter vectors after each of the first `steps` updates (loo advantage, no gradient clipping)."""
    config = cfg(cache, optimizer=optimizer, lr=lr, reward_scale=scale, steps=steps, max_grad_norm=1e9, checkpoint_every=1)
    module = load_policy(config.model, make_task(TASK), Path(cache)).module
    names = [n for n, _ in module.named_parameters()]  # the state dict also holds tied copies and buffers
    theta0 = torch.cat([p.detach().reshape(-1) for p in module.parameters()])
    points = []
    for k in (1, 5, 10, steps):
        folder = Path(cache) / f"traj-{optimizer}-{scale}-{k}"
        train_trial(TrialConfig.flat(**{**config.__dict__, "steps": k, "checkpoint_dir": str(folder)}))
        state = load_checkpoint(folder)["model"]
        points.append(torch.cat([state[n].reshape(-1) for n in names]) - theta0)
    return points


def relative_difference(a, b):
    return float(np.mean([(x - y).norm() / x.norm() for x, y in zip(a, b)]))


def test_reward_scale_barely_moves_adamw_but_scales_sgd(model_cache):
    """arXiv 2601.05002: AdamW normalises the reward scale away; plain SGD's updates scale with it."""
    adam = relative_difference(trajectory(model_cache, "adamw", 2e-4, 1.0), trajectory(model_cache, "adamw", 2e-4, 10.0))
    sgd = relative_difference(trajectory(model_cache, "sgd", 0.05, 1.0), trajectory(model_cache, "sgd", 0.05, 10.0))
    print(f"relative trajectory difference, rewards x10: AdamW {adam:.4f}, SGD {sgd:.3f}")
    assert adam < 0.05
    assert sgd > 5.0  # ~9 = 10 - 1 while the sampled batches still coincide


def test_a_killed_trial_resumes_from_its_checkpoint_with_the_same_result(model_cache, tmp_path):
    straight = train_trial(cfg(model_cache, steps=30))

    class Killed(Exception):
        pass

    def die_at_25(metrics, step):
        if step == 25 and "reward_mean" in metrics:
            raise Killed

    config = cfg(model_cache, steps=30, checkpoint_every=10, checkpoint_dir=str(tmp_path / "ckpt"))
    with pytest.raises(Killed):
        train_trial(config, die_at_25)
    assert load_checkpoint(config.checkpoint_dir)["trial"]["step"] == 20
    steps_seen = []
    resumed = train_trial(config, lambda m, s: steps_seen.append(s))
    assert min(s for s in steps_seen) == 20  # it did not start over: the first report is the resume point
    assert resumed.status == "succeeded" and resumed.metrics == straight.metrics  # the steps' summary kept in counters
    assert "truncation_rate" in resumed.metrics and "frac_groups_all_wrong" in resumed.metrics


def test_a_kill_while_a_checkpoint_is_written_resumes_from_the_one_before_the_only_one_kept(model_cache, tmp_path, monkeypatch):
    """groupscale's trainer keeps one checkpoint.pt, replaced whole (written beside it, then renamed): a worker killed
    while writing the next one leaves the last complete one, which a resume reads; the leftover goes at the next save."""
    straight = train_trial(cfg(model_cache, steps=30))
    config = cfg(model_cache, steps=30, checkpoint_every=10, checkpoint_dir=str(tmp_path / "ckpt"))
    save = torch.save

    def killed_while_writing_step_20(state, path):
        save(state, path)
        if state["trial"]["step"] == 20:
            Path(path).write_bytes(Path(path).read_bytes()[:1000])  # the part written before the kill
            raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", killed_while_writing_step_20)
    with pytest.raises(KeyboardInterrupt):
        train_trial(config)
    monkeypatch.setattr(torch, "save", save)
    assert sorted(p.name for p in Path(config.checkpoint_dir).iterdir()) == ["checkpoint.pt", "checkpoint.pt.tmp"]
    assert load_checkpoint(config.checkpoint_dir)["trial"]["step"] == 10
    resumed = train_trial(config)
    assert resumed.status == "succeeded" and resumed.metrics == straight.metrics
    assert sorted(p.name for p in Path(config.checkpoint_dir).iterdir()) == ["checkpoint.pt"]
    # the docs' size: float32 weights and AdamW's two float32 moments, 12 bytes for each of tiny-llama's parameters
    assert (Path(config.checkpoint_dir) / "checkpoint.pt").stat().st_size == pytest.approx(12 * 101_696, rel=0.05)


def test_metric_points_are_flushed_before_each_checkpoint_is_written(model_cache, tmp_path):
    """A worker killed between the two then resumes from the older checkpoint (some steps logged
    twice) and never from a checkpoint whose points were still in the buffer (steps lost)."""
    config = cfg(model_cache, steps=20, checkpoint_every=10, checkpoint_dir=str(tmp_path / "ckpt"))

    class Report:
        def __init__(self):
            self.buffered, self.durable = [], []

        def __call__(self, metrics, step):
            self.buffered.append(step)

        def flush(self):
            saved = load_checkpoint(config.checkpoint_dir)
            # at the flush for step k, the checkpoint on disk is still the previous one
            assert saved is None or saved["trial"]["step"] < max(self.buffered)
            self.durable += self.buffered
            self.buffered = []

    report = Report()
    train_trial(config, report)
    assert set(range(1, 21)) <= set(report.durable)


def test_tokenizer_without_pad_token_gives_true_completion_lengths(tmp_path):
    task = make_task(TASK)
    tok = build_char_tokenizer(task.vocabulary())
    model = tiny_llama(tok, 0)
    tok.pad_token = None
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    policy = load_lm(tmp_path)
    assert policy.tokenizer.pad_token_id == policy.tokenizer.eos_token_id
    torch.manual_seed(0)
    ro = policy.sample(["1+2=", "17+25="] * 16, max_new_tokens=6, temperature=1.0)
    eos = policy.tokenizer.eos_token_id
    for ids, mask in zip(ro.completion_ids.tolist(), ro.completion_mask.tolist()):
        true_len = ids.index(eos) + 1 if eos in ids else len(ids)
        assert sum(mask) == true_len


def write_jsonl(path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    rows = [{"prompt": f"{a}+{b}=", "answer": int(a + b)} for a, b in rng.integers(0, 20, size=(n, 2))]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_jsonl_task_and_local_model_folder_train_through_the_spec(model_cache, tmp_path):
    # A local model folder made with save_pretrained: the warm-started preset, saved elsewhere.
    preset = load_policy({"preset": "tiny-llama"}, make_task(TASK), Path(model_cache))
    folder = tmp_path / "my-model"
    preset.module.save_pretrained(folder)
    preset.tokenizer.save_pretrained(folder)
    data = write_jsonl(tmp_path / "sums.jsonl")
    spec = SweepSpec.model_validate(
        {
            "name": "mine",
            "task": {"name": "jsonl", "path": str(data), "reward": "numeric_match"},
            "model": {"path": str(folder)},
            "group_sizes": [4],
            "samples_per_step": [32],
            "steps": 15,
            "eval": {"prompts": 64},
        }
    )
    result = train_trial(TrialConfig.first_of(spec, model_cache))
    assert result.status == "succeeded", result.reason
    assert 0.0 < result.metrics["eval_accuracy_initial"] < 1.0
    assert result.metrics["gap"] == pytest.approx(1 - result.metrics["eval_accuracy"])


def test_jsonl_rewards_and_errors(tmp_path):
    from workers.tasks.jsonl import exact_match, numeric_match

    assert numeric_match(" 42 apples", "42") == 1.0 and numeric_match("4.20e1", "42") == 1.0
    assert numeric_match("none", "42") == 0.0 and exact_match(" 42 ", "42") == 1.0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x", "answer": 1}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        make_task({"name": "jsonl", "path": str(bad)})


def test_kl_to_the_frozen_starting_policy(model_cache):
    _, steps = run(cfg(model_cache, kl_beta=0.1, steps=5))
    assert steps[0]["kl"] == 0.0  # the first update starts at the reference
    assert max(m["kl"] for m in steps[1:]) > 0
