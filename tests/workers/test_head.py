"""The LM head's per-position statistics: the in-place backward (workers.head._HeadStats) gives autograd's
gradients of the plain computation, for every output, with a bias, stop ids and a temperature."""

import pytest
import torch

from workers.head import _HeadStats, head_stats, reference_stats


def _head(vocab=11, hidden=6, bias=True, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    head = torch.nn.Linear(hidden, vocab, bias=bias).to(dtype)
    h = torch.randn(7, hidden, dtype=dtype, requires_grad=True)
    targets = torch.randint(0, vocab, (7,))
    return head, h, targets


@pytest.mark.parametrize("stops", [None, [2, 5]])
@pytest.mark.parametrize("bias", [True, False])
def test_head_stats_backward_passes_gradcheck(stops, bias):
    head, h, targets = _head(bias=bias)
    stop_ids = None if stops is None else torch.tensor(stops)
    inputs = (h, head.weight, head.bias, targets, 0.7, stop_ids)
    assert torch.autograd.gradcheck(lambda *a: _HeadStats.apply(*a), inputs, eps=1e-6, atol=1e-8)


def test_head_stats_equal_autograd_of_the_plain_computation():
    head, h, targets = _head()
    stop_ids = torch.tensor([1, 4, 9])
    upstream = [torch.randn(7, dtype=torch.float64) for _ in range(3)]
    ref = reference_stats(head, h, targets, 0.7, stop_ids)
    ours = _HeadStats.apply(h, head.weight, head.bias, targets, 0.7, stop_ids)
    for a, b in zip(ref, ours):
        assert torch.allclose(a, b, atol=1e-12)
    params = (h, head.weight, head.bias)
    ga = torch.autograd.grad(sum((u * r).sum() for u, r in zip(upstream, ref)), params)
    gb = torch.autograd.grad(sum((u * o).sum() for u, o in zip(upstream, ours)), params)
    for a, b in zip(ga, gb):
        assert torch.allclose(a, b, atol=1e-12)
    assert ours[1].min() > 0 and ours[1].max() < torch.log(torch.tensor(11.0))  # an entropy, in nats


def test_bfloat16_heads_get_gradients_of_their_own_dtype():
    head, h, targets = _head(vocab=50, hidden=16, dtype=torch.bfloat16)
    ref = reference_stats(head, h, targets, 1.0, None)
    ours = head_stats(head, h.unsqueeze(0), targets.unsqueeze(0), 1.0)
    assert ours[0].dtype == torch.float32 and torch.allclose(ref[0], ours[0].squeeze(0), atol=1e-5)
    ga = torch.autograd.grad(ref[0].sum() + ref[1].sum(), (h, head.weight))
    gb = torch.autograd.grad(ours[0].sum() + ours[1].sum(), (h, head.weight))
    for a, b in zip(ga, gb):
        assert b.dtype == torch.bfloat16 and torch.allclose(a.float(), b.float(), atol=2e-2, rtol=2e-2)


def test_a_hooked_head_takes_the_checkpointed_path_with_the_same_results():
    head, h, targets = _head()
    seen = []
    head.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    hs, ts = h.reshape(1, 7, -1), targets.reshape(1, 7)
    hooked = head_stats(head, hs, ts, 0.5, torch.tensor([3]), chunk_elements=11 * 2)
    assert seen  # the module ran, so its hook did
    (g_hooked,) = torch.autograd.grad(sum(t.sum() for t in hooked), h)
    plain = _HeadStats.apply(h, head.weight, head.bias, targets, 0.5, torch.tensor([3]))
    (g_plain,) = torch.autograd.grad(sum(t.sum() for t in plain), h)
    assert torch.allclose(g_hooked, g_plain, atol=1e-12)
