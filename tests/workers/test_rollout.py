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


def test_the_sampler_draws_each_token_at_its_softmax_probability_at_the_temperature():
    """200,000 rows of the same logits at T = 0.7: every token's frequency within 5 standard errors of
    softmax(logits / T) (at T = 1 the first token's would be 0.64, not 0.80); a token of probability 0 in float32
    (logit -1e4) is never drawn."""
    from workers.rollout import _InverseCdfSampler

    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, -1e4])
    n, temperature = 200_000, 0.7
    torch.manual_seed(0)
    scores = _InverseCdfSampler(temperature)(torch.zeros(n, 1, dtype=torch.long), logits.repeat(n, 1))
    assert ((scores == 0).sum(dim=1) == 1).all() and (scores[scores != 0] == -float("inf")).all()  # one token a row
    freq = torch.bincount(scores.argmax(dim=1), minlength=5).double() / n
    p = torch.softmax(logits.double() / temperature, dim=0)
    assert (freq - p).abs().max() <= 5 * (p * (1 - p) / n).sqrt().max(), (freq, p)
    assert freq[4] == 0 and abs(p[0] - torch.softmax(logits.double(), 0)[0]) > 0.1


def test_the_sampler_draws_across_blocks_of_a_large_vocabulary():
    """700 tokens (three blocks of 256, the last padded): 60,000 draws binned by 50 tokens, each bin within 5
    standard errors of its softmax mass, and no draw of a -inf token or of the padding past the vocabulary."""
    from workers.rollout import _InverseCdfSampler

    torch.manual_seed(1)
    logits = torch.linspace(0.0, -4.0, 700) + 0.5 * torch.randn(700)
    logits[[3, 300, 650]] = -float("inf")
    n = 60_000
    scores = _InverseCdfSampler(1.0)(torch.zeros(n, 1, dtype=torch.long), logits.repeat(n, 1))
    drawn = scores.argmax(dim=1)
    assert not torch.isin(drawn, torch.tensor([3, 300, 650])).any() and drawn.max() < 700
    p = torch.softmax(logits.double(), dim=0).reshape(14, 50).sum(dim=1)
    freq = torch.bincount(drawn // 50, minlength=14).double() / n
    assert (freq - p).abs().max() <= 5 * (p * (1 - p) / n).sqrt().max(), (freq, p)


def test_generate_samples_the_models_own_distribution(tmp_path):
    """A completion's first token, 4000 times from one prompt through generate (greedy over the sampler's scores):
    frequencies within 5 standard errors of the model's softmax(logits / T) at the prompt's last position."""
    from tests.factories import tiny_arithmetic_lm

    policy = tiny_arithmetic_lm(tmp_path)
    n, temperature = 4000, 1.3
    ids = torch.tensor([policy.encoder.encode(["17+25="])[0]])
    with torch.no_grad():
        p = torch.softmax(policy.module(input_ids=ids).logits[0, -1].double() / temperature, dim=0)
    torch.manual_seed(0)
    rollout = policy.sample(["17+25="] * n, max_new_tokens=1, temperature=temperature)
    freq = torch.bincount(rollout.completion_ids[:, 0], minlength=p.numel()).double() / n
    assert (freq - p).abs().max() <= 5 * (p * (1 - p) / n).sqrt().max() + 1e-12, (freq, p)
    assert p.max() < 0.9  # the test can see a sampler that is off (not a near-deterministic prompt)


def test_a_nan_or_infinite_logit_stops_sampling_with_its_own_error():
    import pytest

    from workers.rollout import NonFiniteLogitsError, _InverseCdfSampler

    with pytest.raises(NonFiniteLogitsError, match="non-finite logits"):
        _InverseCdfSampler(1.0)(torch.zeros(2, 1, dtype=torch.long), torch.tensor([[0.0, 1.0], [float("nan"), 0.0]]))
    for bad in (float("inf"), -float("inf")):  # +inf, and a row with no finite logit
        with pytest.raises(NonFiniteLogitsError):
            _InverseCdfSampler(1.0)(torch.zeros(1, 1, dtype=torch.long), torch.tensor([[bad, -float("inf")]]))
    masked = _InverseCdfSampler(1.0)(torch.zeros(1, 1, dtype=torch.long), torch.tensor([[-float("inf"), 0.0]]))
    assert masked.argmax().item() == 1  # a -inf logit alone is a token of probability 0
