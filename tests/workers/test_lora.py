"""LoRA (``model.lora``) in groupscale's trainer: the adapter alone trains, checkpoints hold it and resume exactly, and the
probe takes score vectors over it."""

import math
import time

import pytest
import torch

from sweeps.spec import ProbeSpec
from workers.batch import sample_batch, setup
from workers.checkpoint import load_checkpoint
from workers.engines.groupscale import TrialConfig, grpo_update, make_optimizer, train_trial
from workers.models.lora import LORA_MARK, parameter_counts
from workers.models.presets import preset_path
from workers.probe import run_probe
from workers.tasks import make_task

LORA = {"r": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": "all-linear"}


def cfg(cache, **over):
    base = dict(
        task={"name": "arithmetic", "max_operand": 49},
        model={"preset": "tiny-llama", "lora": LORA},
        group_size=4,
        samples_per_step=32,
        seed=0,
        steps=6,
        lr=5e-3,
        eval_prompts=64,
        cache_dir=str(cache),
    )
    return TrialConfig.flat(**{**base, **over})


def test_only_the_adapter_changes_and_the_counts_say_so(model_cache):
    config = cfg(model_cache)
    task, policy, rng = setup(config)
    model = policy.module
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer("adamw", trainable, config.grpo.lr)
    for step in range(1, 4):
        grpo_update(policy, None, opt, sample_batch(policy, task, config, rng, step), config)
    changed = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    assert changed and all(LORA_MARK in name for name in changed)  # the base weights are frozen
    assert any("lora_A" in name for name in changed)  # lora_B starts at 0; after a few steps A moves too
    counts = parameter_counts(model)
    assert 0 < counts["parameters_trainable"] < 0.2 * counts["parameters_total"]
    assert counts["parameters_trainable"] == sum(p.numel() for p in trainable)


def test_a_resumed_lora_trial_equals_an_uninterrupted_one_and_checkpoints_hold_the_adapter(model_cache, tmp_path):
    straight = train_trial(cfg(model_cache))

    class Killed(Exception):
        pass

    def die_at_5(metrics, step):
        if step == 5 and "reward_mean" in metrics:
            raise Killed

    config = cfg(model_cache, checkpoint_every=2, checkpoint_dir=str(tmp_path / "ckpt"))
    with pytest.raises(Killed):
        train_trial(config, die_at_5)
    saved = load_checkpoint(config.checkpoint_dir)
    assert saved["trial"]["step"] == 4 and saved["model"] and all(LORA_MARK in key for key in saved["model"])
    resumed = train_trial(config)
    assert straight.status == resumed.status == "succeeded"
    assert resumed.metrics == straight.metrics
    assert straight.metrics["gap"] != train_trial(cfg(model_cache, lr=0.0)).metrics["gap"]  # the adapter did learn


def test_the_probe_over_the_adapter_gives_a_finite_g_star(model_cache):
    lora = cfg(model_cache)
    preset_path("tiny-llama", make_task(lora.task), model_cache)  # built (or found) before either probe is timed
    start = time.perf_counter()
    over_adapter = run_probe(lora, ProbeSpec(prompts=32, completions=8, parameters="lora"))
    adapter_s = time.perf_counter() - start
    start = time.perf_counter()
    over_all = run_probe(cfg(model_cache, model={"preset": "tiny-llama"}), ProbeSpec(prompts=32, completions=8, parameters="all"))
    all_s = time.perf_counter() - start
    adapter_g, all_g = over_adapter["g_star"], over_all["g_star"]
    print(
        f"\nprobe over the LoRA adapter: {adapter_s:.2f} s, G* {adapter_g:.3g}; over all weights: {all_s:.2f} s, G* {all_g:.3g}"
    )
    assert over_adapter["g_star"] is not None and math.isfinite(over_adapter["g_star"]) and over_adapter["g_star"] >= 1
    assert over_adapter["tau2"] > 0 and over_adapter["sigma2"] > 0
    with pytest.raises(ValueError, match="needs a model with a LoRA adapter"):
        run_probe(
            cfg(model_cache, model={"preset": "tiny-llama"}),
            ProbeSpec(prompts=8, completions=4, projection_dim=64, parameters="lora"),
        )
