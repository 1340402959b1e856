import pytest
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
    from workers.decode import draw_tokens

    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, -1e4])
    n, temperature = 200_000, 0.7
    torch.manual_seed(0)
    drawn = draw_tokens(logits.repeat(n, 1), temperature)
    assert drawn.shape == (n,) and drawn.dtype == torch.long
    freq = torch.bincount(drawn, minlength=5).double() / n
    p = torch.softmax(logits.double() / temperature, dim=0)
    assert (freq - p).abs().max() <= 5 * (p * (1 - p) / n).sqrt().max(), (freq, p)
    assert freq[4] == 0 and abs(p[0] - torch.softmax(logits.double(), 0)[0]) > 0.1


def test_the_sampler_draws_across_blocks_of_a_large_vocabulary():
    """700 tokens (three blocks of 256, the last padded): 60,000 draws binned by 50 tokens, each bin within 5
    standard errors of its softmax mass, and no draw of a -inf token or of the padding past the vocabulary."""
    from workers.decode import draw_tokens

    torch.manual_seed(1)
    logits = torch.linspace(0.0, -4.0, 700) + 0.5 * torch.randn(700)
    logits[[3, 300, 650]] = -float("inf")
    n = 60_000
    drawn = draw_tokens(logits.repeat(n, 1), 1.0)
    assert not torch.isin(drawn, torch.tensor([3, 300, 650])).any() and drawn.max() < 700
    p = torch.softmax(logits.double(), dim=0).reshape(14, 50).sum(dim=1)
    freq = torch.bincount(drawn // 50, minlength=14).double() / n
    assert (freq - p).abs().max() <= 5 * (p * (1 - p) / n).sqrt().max(), (freq, p)


@pytest.mark.parametrize("group_size", [1, 8])
def test_generate_samples_the_models_own_distribution(tmp_path, group_size):
    """A completion's first token, 4000 times from one prompt through generate (workers.decode; its prompt prefilled
    once for each group of 8): frequencies within 5 standard errors of the model's softmax(logits / T) at the
    prompt's last position (the model's own forward, not the decode loop's)."""
    from tests.factories import tiny_arithmetic_lm

    policy = tiny_arithmetic_lm(tmp_path)
    n, temperature = 4000, 1.3
    ids = torch.tensor([policy.encoder.encode(["17+25="])[0]])
    with torch.no_grad():
        p = torch.softmax(policy.module(input_ids=ids).logits[0, -1].double() / temperature, dim=0)
    torch.manual_seed(0)
    rollout = policy.sample(["17+25="] * n, max_new_tokens=2, temperature=temperature, group_size=group_size)
    first = rollout.completion_ids[:, 0]
    freq = torch.bincount(first, minlength=p.numel()).double() / n
    assert (freq - p).abs().max() <= 5 * (p * (1 - p) / n).sqrt().max() + 1e-12, (freq, p)
    assert p.max() < 0.9  # the test can see a sampler that is off (not a near-deterministic prompt)
    top = int(p.argmax())  # the second token after the likeliest first one: a decode step with the KV cache
    assert top not in policy.stop_ids
    with torch.no_grad():
        q = torch.softmax(
            policy.module(input_ids=torch.cat([ids, torch.tensor([[top]])], 1)).logits[0, -1].double() / temperature, 0
        )
    after = rollout.completion_ids[first == top, 1]
    freq2 = torch.bincount(after, minlength=q.numel()).double() / after.numel()
    assert (freq2 - q).abs().max() <= 5 * (q * (1 - q) / after.numel()).sqrt().max() + 1e-12, (freq2, q)


def test_a_nan_or_infinite_logit_stops_sampling_with_its_own_error():
    import pytest

    from workers.decode import NonFiniteLogitsError, draw_tokens

    with pytest.raises(NonFiniteLogitsError, match="non-finite logits"):
        draw_tokens(torch.tensor([[0.0, 1.0], [float("nan"), 0.0]]), 1.0)
    for bad in (float("inf"), -float("inf")):  # +inf, and a row with no finite logit
        with pytest.raises(NonFiniteLogitsError):
            draw_tokens(torch.tensor([[bad, -float("inf")]]), 1.0)
    assert draw_tokens(torch.tensor([[-float("inf"), 0.0]]), 1.0).item() == 1  # a -inf logit alone: probability 0


def test_a_groups_shared_prefill_samples_what_each_rows_own_prefill_does(tmp_path):
    """The same seed, prompts in groups of 4 with and without the shared prefill: the same tokens (the logits agree
    to float rounding); after a row's first stop id only padding, and the loop ends once every row has stopped."""
    from tests.factories import tiny_arithmetic_lm
    from workers.decode import sample_tokens
    from workers.rollout import left_pad

    policy = tiny_arithmetic_lm(tmp_path)
    prompts = [p for p in ("1+2=", "17+25=", "3+44=", "9+9=") for _ in range(4)]
    ids, att = left_pad(policy.encoder.encode(prompts), policy.tokenizer.pad_token_id)
    runs = []
    for g in (1, 4):
        torch.manual_seed(3)
        runs.append(sample_tokens(policy.module, ids, att, max_new_tokens=12, temperature=1.0,
                                  stop_ids=policy.stop_ids, pad_id=policy.tokenizer.pad_token_id, group_size=g))  # fmt: skip
    assert torch.equal(runs[0], runs[1])
    tokens, stops = runs[0], torch.isin(runs[0], torch.tensor(policy.stop_ids))
    first = torch.where(stops.any(dim=1), stops.int().argmax(dim=1), tokens.shape[1])
    after = torch.arange(tokens.shape[1]) > first[:, None]
    assert (tokens[after] == policy.tokenizer.pad_token_id).all()
    assert tokens.shape[1] == 12 or (stops.any(dim=1).all() and tokens.shape[1] == int(first.max()) + 1)


def test_decoding_at_a_tiny_temperature_is_transformers_greedy_generate():
    """At T = 1e-4 a draw is the argmax: 16 prompts of four lengths (left-padded), 8 tokens, equal to
    ``model.generate(do_sample=False)`` token for token (the KV cache, the positions and the padding are its). The
    tiny llama's weights are redrawn at std 0.3 so that its greedy completions differ from prompt to prompt."""
    from transformers import GenerationConfig

    from workers.decode import sample_tokens
    from workers.models.lm import LMPolicy
    from workers.models.presets import build_char_tokenizer, tiny_llama
    from workers.rollout import left_pad

    tok = build_char_tokenizer("0123456789+=")
    model, g = tiny_llama(tok, 0).eval(), torch.Generator().manual_seed(0)
    with torch.no_grad():
        for w in (p for p in model.parameters() if p.dim() == 2):
            w.copy_(torch.randn(w.shape, generator=g) * 0.3)
    policy = LMPolicy(model, tok)
    prompts = ["1+2=", "17+25=", "3+44=", "9+9=", "40+2=", "5+17=", "33+33=", "8+1="] * 2
    ids, att = left_pad(policy.encoder.encode(prompts), tok.pad_token_id)
    pad, stops = tok.pad_token_id, policy.stop_ids
    ours = sample_tokens(model, ids, att, max_new_tokens=8, temperature=1e-4, stop_ids=stops, pad_id=pad)
    config = GenerationConfig(do_sample=False, max_new_tokens=8, pad_token_id=pad, eos_token_id=list(stops))
    with torch.no_grad():
        theirs = model.generate(input_ids=ids, attention_mask=att, generation_config=config)[:, ids.shape[1] :]
    assert torch.equal(ours, theirs), (ours, theirs)
    assert len({tuple(r) for r in ours.tolist()}) == 8 and ours.shape[1] == 8  # the check can see a shift
