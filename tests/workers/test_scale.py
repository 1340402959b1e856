"""Real-scale trials: micro-batches give the single-pass update, chunked scoring equals the full log-softmax,
pad rows cannot poison real logits, and a diverged model fails its trial with a named cause."""

import copy
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from tests.factories import tiny_arithmetic_lm
from workers import algos
from workers.engines.groupscale import Batch, TrialConfig, grpo_update, make_optimizer
from workers.head import head_stats
from workers.rollout import completion_logprobs, completion_logprobs_entropy, position_ids_from_mask


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return tiny_arithmetic_lm(tmp_path_factory.mktemp("tiny"))


def _batch(policy, g=4, n=4, seed=0):
    prompts = [p for p in ("1+2=", "17+25=", "3+44=", "9+9=")[:n] for _ in range(g)]
    torch.manual_seed(seed)
    ro = policy.sample(prompts, max_new_tokens=5, temperature=1.0, group_size=g)
    rewards = torch.tensor(np.random.default_rng(seed).integers(0, 2, (n, g)), dtype=torch.float32)
    return Batch([], ro, rewards, algos.compute_advantages(rewards, "loo").reshape(-1))


def _cfg(**over):
    base = {
        "task": {},
        "model": {},
        "group_size": 4,
        "samples_per_step": 16,
        "seed": 0,
        "steps": 1,
        "optimizer": "sgd",
        "lr": 1.0,
        "max_new_tokens": 5,
        "max_grad_norm": 1e9,
    }
    return TrialConfig.flat(**{**base, **over})


@pytest.mark.parametrize("aggregation", sorted(algos.LOSS_AGGREGATIONS))
@pytest.mark.parametrize(("inner_steps", "kl_beta"), [(1, 0.0), (2, 0.1)])
def test_micro_batches_give_the_single_pass_update(policy, aggregation, inner_steps, kl_beta):
    batch = _batch(policy)
    results = {}
    for mbs in (16, 4, 3, None):  # B, B/4 = G (whole groups, shared prompts), 3 (groups split), default
        p = copy.deepcopy(policy)
        ref = copy.deepcopy(policy) if kl_beta else None
        cfg = _cfg(loss_aggregation=aggregation, micro_batch_size=mbs, inner_steps=inner_steps, kl_beta=kl_beta)
        opt = make_optimizer("sgd", p.module.parameters(), 1.0)
        stats = grpo_update(p, ref, opt, batch, cfg)
        results[mbs] = (torch.cat([q.detach().reshape(-1) for q in p.module.parameters()]), stats)
    single, stats = results[None]
    assert (single - torch.cat([q.detach().reshape(-1) for q in policy.module.parameters()])).abs().max() > 1e-4  # it moved
    for mbs, (params, st) in results.items():
        assert torch.allclose(params, single, atol=1e-5, rtol=0), (mbs, (params - single).abs().max())
        assert math.isclose(st.loss, stats.loss, rel_tol=1e-5, abs_tol=1e-7) and math.isclose(
            st.entropy, stats.entropy, rel_tol=1e-5
        )
        assert math.isclose(st.kl, stats.kl, rel_tol=1e-4, abs_tol=1e-8) and st.clip_frac_low == pytest.approx(
            stats.clip_frac_low
        )


def test_aggregations_with_step_totals_add_up_over_micro_batches():
    torch.manual_seed(0)
    loss, mask = torch.randn(6, 5), (torch.rand(6, 5) > 0.3).float()
    for mode in algos.LOSS_AGGREGATIONS:
        whole = algos.aggregate_loss(loss, mask, mode, 5)
        parts = sum(algos.aggregate_loss(loss[i : i + 2], mask[i : i + 2], mode, 5, 6, float(mask.sum())) for i in (0, 2, 4))
        assert torch.isclose(whole, parts, atol=1e-6), mode
        per_part_mean = np.mean([float(algos.aggregate_loss(loss[i : i + 2], mask[i : i + 2], mode, 5)) for i in (0, 2, 4)])
        if mode == "token_mean":  # the bug the totals prevent: a mean of per-micro-batch token means
            assert not math.isclose(per_part_mean, float(whole), rel_tol=1e-3)


def _full_logsoftmax(model, ro, temperature):
    """The computation chunked scoring replaces: (S, L, V) float32 log-softmax of every completion position."""
    ids, att, p = ro.input_ids, ro.attention_mask, ro.prompt_len
    logits = model(input_ids=ids, attention_mask=att, position_ids=position_ids_from_mask(att)).logits[:, p - 1 : -1]
    return torch.log_softmax(logits.float() / temperature, dim=-1)


@pytest.mark.parametrize("group_size", [1, 4])
def test_chunked_logprobs_and_entropy_equal_the_full_log_softmax(policy, group_size):
    ro = replace(_batch(policy).rollout, group_size=group_size)
    params = list(policy.module.parameters())
    full = _full_logsoftmax(policy.module, ro, 0.7)
    ref_logp = full.gather(-1, ro.completion_ids.unsqueeze(-1)).squeeze(-1) * ro.completion_mask
    ref_ent = -(full.exp() * full).sum(-1) * ro.completion_mask
    logp, ent = completion_logprobs_entropy(policy.module, ro, 0.7)
    logp, ent = logp * ro.completion_mask, ent * ro.completion_mask
    assert torch.allclose(logp, ref_logp, atol=1e-5) and torch.allclose(ent, ref_ent, atol=1e-5)
    for a, b in zip(
        torch.autograd.grad((ref_logp + 0.1 * ref_ent).sum(), params), torch.autograd.grad((logp + 0.1 * ent).sum(), params)
    ):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_chunks_smaller_than_a_row_give_the_same_values(policy):
    hidden = torch.randn(3, 5, 64, requires_grad=True)
    targets = torch.randint(0, 12, (3, 5))
    head = policy.module.get_output_embeddings()
    whole = head_stats(head, hidden, targets, 1.0, None, chunk_elements=10**9)
    tiny = head_stats(head, hidden, targets, 1.0, None, chunk_elements=head.weight.shape[0] * 2)  # 2 positions a chunk
    for a, b in zip(whole, tiny):
        assert torch.allclose(a, b, atol=1e-6)
    (ga,) = torch.autograd.grad(whole[0].sum(), hidden)
    (gb,) = torch.autograd.grad(tiny[0].sum(), hidden)
    assert torch.allclose(ga, gb, atol=1e-6)


@pytest.mark.parametrize("group_size", [1, 4])
def test_nan_in_a_pad_row_leaves_every_real_logit_finite(policy, group_size):
    ro = replace(_batch(policy).rollout, group_size=group_size)
    assert (ro.attention_mask == 0).any()  # prompts of different lengths: some rows are left-padded
    pad = policy.tokenizer.pad_token_id
    ids = ro.input_ids.clone()
    sampled_pad = (ids[:, ro.prompt_len :] == pad) & ro.completion_mask.bool()  # a pad id the model sampled is a real token
    ids[:, ro.prompt_len :][sampled_pad] = 5
    ro = replace(ro, input_ids=ids)
    poisoned = copy.deepcopy(policy.module)
    head = poisoned.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone())  # untie: NaN in the pad embedding only, not in the head
    with torch.no_grad():
        poisoned.get_input_embeddings().weight[pad] = float("nan")
    naive = _full_logsoftmax(poisoned, replace(ro, group_size=1), 1.0)
    assert not torch.isfinite(naive[ro.completion_mask.bool()]).all()  # without the guard, NaN reaches real tokens
    logp = completion_logprobs(poisoned, ro, 1.0)
    assert torch.isfinite(logp[ro.completion_mask.bool()]).all()
    assert torch.allclose(logp * ro.completion_mask, completion_logprobs(policy.module, ro, 1.0) * ro.completion_mask, atol=1e-5)


def test_a_nan_weight_after_step_3_fails_the_trial_naming_non_finite_logits_and_step_4(model_cache, monkeypatch):
    import workers.engines.groupscale as trainer

    calls = []
    original = trainer.grpo_update

    def poison_after_three(policy, *args):
        out = original(policy, *args)
        calls.append(1)
        if len(calls) == 3:
            with torch.no_grad():
                policy.module.get_input_embeddings().weight.fill_(float("nan"))
        return out

    monkeypatch.setattr(trainer, "grpo_update", poison_after_three)
    cfg = TrialConfig.flat(
        task={"name": "arithmetic"},
        model={"preset": "tiny-llama"},
        group_size=4,
        samples_per_step=16,
        seed=0,
        steps=10,
        eval_prompts=32,
        eval_every=0,  # no eval between steps 3 and 4 (the default's, every 3 steps, meets the NaN first)
        cache_dir=str(model_cache),
    )
    result = trainer.train_trial(cfg)
    assert result.status == "failed" and result.reason == "non-finite logits in generation at step 4", result.reason
    assert result.steps_done == 3


def test_generation_in_chunks_keeps_whole_groups(policy):
    from workers.rollout import Rollout

    torch.manual_seed(0)
    prompts = [p for p in ("1+2=", "17+25=", "3+44=") for _ in range(2)]
    parts = [policy.sample(prompts[i : i + 2], max_new_tokens=5, temperature=1.0, group_size=2) for i in (0, 2, 4)]
    ro = Rollout.concat(parts, group_size=2)
    assert ro.input_ids.shape[0] == 6 and ro.prompt_len == max(p.prompt_len for p in parts)
    for part, sl in zip(parts, (slice(0, 2), slice(2, 4), slice(4, 6))):  # each chunk's completions, where they were
        mine = ro.rows(sl)
        assert mine.texts == part.texts
        n = int(part.completion_mask.sum())
        assert int(mine.completion_mask.sum()) == n
        a = completion_logprobs(policy.module, part, 1.0) * part.completion_mask
        b = completion_logprobs(policy.module, mine, 1.0)[:, : a.shape[1]] * mine.completion_mask[:, : a.shape[1]]
        assert torch.allclose(a, b, atol=1e-5)


def test_two_gpus_per_trial_is_refused_with_the_reason():
    from pydantic import ValidationError

    from sweeps.spec import SweepSpec

    base = {
        "name": "s",
        "task": {"name": "arithmetic"},
        "model": {"preset": "tiny-llama"},
        "group_sizes": [2],
        "samples_per_step": [4],
    }
    with pytest.raises(ValidationError, match="each process uses one GPU at most .* allowed: 0 to 1") as e:
        SweepSpec.model_validate({**base, "resources": {"gpus_per_trial": 2}})
    assert e.value.errors()[0]["loc"] == ("resources", "gpus_per_trial")
    assert SweepSpec.model_validate({**base, "resources": {"gpus_per_trial": 0.5}}).resources.gpus_per_trial == 0.5
    with pytest.raises(ValidationError, match="gpus_per_process=2: a process uses one GPU; allowed: 0 to 1") as e:
        SweepSpec.model_validate({**base, "resources": {"num_processes": 2, "gpus_per_process": 2}})
    assert [err["loc"] for err in e.value.errors()] == [("resources", "gpus_per_process")]


def test_gradient_checkpointing_gives_the_same_update(policy):
    batch = _batch(policy)
    after = []
    for checkpointing in (False, True):
        p = copy.deepcopy(policy)
        if checkpointing:
            p.module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        p.module.train()
        opt = make_optimizer("sgd", p.module.parameters(), 1.0)
        grpo_update(p, None, opt, batch, _cfg(micro_batch_size=8))
        after.append(torch.cat([q.detach().reshape(-1) for q in p.module.parameters()]))
    assert torch.allclose(after[0], after[1], atol=1e-5, rtol=0)


def test_cuda_out_of_memory_fails_the_trial_with_its_shape_and_advice(model_cache, monkeypatch):
    import workers.engines.groupscale as trainer

    def no_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(trainer, "grpo_update", no_memory)
    cfg = TrialConfig.flat(
        task={"name": "arithmetic"},
        model={"preset": "tiny-llama"},
        group_size=4,
        samples_per_step=16,
        seed=0,
        steps=3,
        eval_prompts=16,
        micro_batch_size=8,
        cache_dir=str(model_cache),
    )
    result = trainer.train_trial(cfg)
    assert result.status == "failed"
    assert result.reason.startswith("CUDA out of memory in training at step 1 (G=4, B=16, micro_batch_size=8")
    assert "lower grpo.micro_batch_size" in result.reason
