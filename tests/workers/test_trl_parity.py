"""One GRPO step of groupscale against TRL's GRPOTrainer: same weights, same completions, same loss and gradients.

For TRL's loss types grpo, dapo and dr_grpo, with scale_rewards group and none, written as a user
writes them (TRL's names in ``grpo:``, sweeps.spec.TRL_ALIASES). groupscale's side is the real update
(workers.engines.groupscale.grpo_update on a batch of the tiny-llama preset), TRL's is ``GRPOTrainer._compute_loss``
on the same prompt and completion ids (TRL 1.x, ``trl/trainer/grpo_trainer.py``). Both use the
advantages TRL computes from the rewards ((r - group mean) / (group std + 1e-4) for group, r - group
mean for none); groupscale's own mean_std advantage divides by the std alone, which the last test
measures against TRL's.
"""

from __future__ import annotations

import copy

import pytest
import torch

trl = pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402

from sweeps.spec import GRPOSpec  # noqa: E402
from sweeps.trial import TrialConfig  # noqa: E402
from workers import algos  # noqa: E402
from workers.batch import Batch, setup  # noqa: E402
from workers.engines.groupscale import grpo_update  # noqa: E402
from workers.rollout import Rollout  # noqa: E402

N, G, P, L = 2, 4, 5, 6  # prompts, completions per prompt, prompt and completion widths
MAX_NEW = 8  # max_new_tokens / max_completion_length: wider than the batch's completions (Dr. GRPO divides by it)
REWARDS = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.2, 1.0, 0.7]])
LENGTHS = [6, 3, 5, 1, 4, 6, 2, 5]  # completion lengths (tokens under the mask): unequal, so the loss types differ


def _trl_advantages(rewards: torch.Tensor, scale: str) -> torch.Tensor:
    """TRL's group advantages (grpo_trainer.py, _generate_and_score_completions), flattened to (N G,)."""
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if scale == "group":
        centred = centred / (rewards.std(dim=1, keepdim=True) + 1e-4)
    return centred.reshape(-1)


@pytest.fixture(scope="module")
def model_and_batch(tmp_path_factory):
    cache = tmp_path_factory.mktemp("models")
    cfg = TrialConfig.flat(
        task={"name": "arithmetic"},
        model={"preset": "tiny-llama"},
        group_size=G,
        samples_per_step=N * G,
        seed=0,
        steps=1,
        cache_dir=str(cache),
    )
    _, policy, _ = setup(cfg)
    gen = torch.Generator().manual_seed(0)
    vocab = policy.module.config.vocab_size
    prompts = torch.randint(3, vocab, (N, P), generator=gen).repeat_interleave(G, dim=0)  # one prompt per group
    completions = torch.randint(3, vocab, (N * G, L), generator=gen)
    mask = (torch.arange(L)[None, :] < torch.tensor(LENGTHS)[:, None]).float()
    rollout = Rollout(
        input_ids=torch.cat([prompts, completions], dim=1),
        attention_mask=torch.cat([torch.ones(N * G, P, dtype=torch.long), mask.long()], dim=1),
        completion_mask=mask,
        prompt_len=P,
        texts=[""] * (N * G),
        truncated=torch.tensor([n == L for n in LENGTHS]),
        group_size=G,
    )
    return policy, rollout, cfg


def _groupscale(policy, rollout: Rollout, cfg: TrialConfig, advantages: torch.Tensor, grpo: dict) -> tuple[float, dict]:
    policy = copy.deepcopy(policy)
    spec = GRPOSpec.model_validate({**grpo, "max_grad_norm": 1e6})  # no clipping: compare raw gradients
    cfg = cfg.with_grpo(**spec.model_dump())
    batch = Batch(problems=[], rollout=rollout, rewards=REWARDS, advantages=advantages)
    opt = torch.optim.SGD(policy.module.parameters(), lr=0.0)  # a step that leaves the weights (and .grad) as they are
    stats = grpo_update(policy, None, opt, batch, cfg)
    return stats.loss, {n: p.grad.clone() for n, p in policy.module.named_parameters() if p.grad is not None}


def _trl(policy, rollout: Rollout, advantages: torch.Tensor, grpo: dict, tmp_path) -> tuple[float, dict]:
    model = copy.deepcopy(policy.module)
    config = trl.GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to=[],
        per_device_train_batch_size=N * G,
        num_generations=G,
        max_completion_length=MAX_NEW,
        temperature=1.0,
        **grpo,
    )
    data = Dataset.from_list([{"prompt": "1+1="}] * (N * G))
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=config,
        train_dataset=data,
        processing_class=policy.tokenizer,
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # what Trainer's loop sets for a window of one pass over B
    mask = rollout.completion_mask
    inputs = {
        "prompt_ids": rollout.input_ids[:, :P],
        "prompt_mask": rollout.attention_mask[:, :P],
        "completion_ids": rollout.completion_ids,
        "completion_mask": mask.long(),
        "advantages": advantages,
        "num_items_in_batch": mask.sum(),
    }
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer._compute_loss(trainer.model, inputs)
    loss.backward()
    return float(loss.detach()), {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("scale", ["group", "none"])
@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_one_step_matches_trl_loss_and_gradients(model_and_batch, tmp_path, loss_type, scale):
    policy, rollout, cfg = model_and_batch
    grpo = {"loss_type": loss_type, "scale_rewards": scale, "epsilon": 0.2, "beta": 0.0, "num_iterations": 1}
    adv = _trl_advantages(REWARDS, scale)
    ours_loss, ours = _groupscale(policy, rollout, cfg, adv, {**grpo, "max_completion_length": MAX_NEW})
    trl_loss, theirs = _trl(policy, rollout, adv, grpo, tmp_path)
    assert ours_loss == pytest.approx(trl_loss, abs=1e-5)
    assert ours.keys() == theirs.keys() and ours
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], atol=1e-5, rtol=1e-5, msg=name)
    assert max(float(g.abs().max()) for g in ours.values()) > 1e-3  # the gradients compared are not all ~0


def test_groupscale_mean_std_differs_from_trl_group_scaling_only_by_trl_s_epsilon():
    """TRL divides by std + 1e-4 (verl by std + 1e-6); groupscale by std: A_trl = A_ours * std / (std + 1e-4)."""
    ours = algos.compute_mean_std_advantages(REWARDS).reshape(-1)
    std = REWARDS.std(dim=1, keepdim=True).expand(-1, G).reshape(-1)
    torch.testing.assert_close(_trl_advantages(REWARDS, "group"), ours * std / (std + 1e-4), atol=1e-7, rtol=1e-6)
    assert float((ours - _trl_advantages(REWARDS, "group")).abs().max()) < 1e-3  # 1e-4 / std, std ~ 0.4-0.6 here
