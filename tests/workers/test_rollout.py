import torch

from workers.rollout import completion_mask_from_stops, position_ids_from_mask


def test_completion_mask_keeps_tokens_through_first_eos():
    eos = 2
    ids = torch.tensor([[5, 6, 2, 0], [5, 2, 2, 0], [5, 6, 7, 8], [2, 0, 0, 0]])
    mask = completion_mask_from_stops(ids, eos)
    assert mask.tolist() == [[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]


def test_position_ids_ignore_left_padding():
    att = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    assert position_ids_from_mask(att).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]


def test_shared_prefix_scoring_equals_full_scoring(tmp_path):
    """Scoring each group's prompt once (group_size G) gives the same log-probs and gradients."""
    from dataclasses import replace

    from tests.factories import tiny_arithmetic_lm
    from workers.rollout import completion_logprobs

    policy = tiny_arithmetic_lm(tmp_path)
    prompts = [p for p in ("1+2=", "17+25=", "3+44=") for _ in range(4)]
    torch.manual_seed(0)
    grouped = policy.sample(prompts, max_new_tokens=5, temperature=1.0, group_size=4)
    flat = replace(grouped, group_size=1)
    params = list(policy.module.parameters())
    a = completion_logprobs(policy.module, flat, 1.0) * flat.completion_mask
    b = completion_logprobs(policy.module, grouped, 1.0) * grouped.completion_mask
    assert torch.allclose(a, b, atol=1e-5)
    for ga, gb in zip(torch.autograd.grad(a.sum(), params), torch.autograd.grad(b.sum(), params)):
        assert torch.allclose(ga, gb, atol=1e-5, rtol=1e-4)
