"""The probe's sketch taken in the backward pass (workers.sketch.TensorSketch, workers.scores.sketched_scores)."""

import math

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import workers.sketch
from workers.probe import combine, prompt_stats, score_vectors
from workers.scores import select_parameters, sketched_scores
from workers.sketch import CountSketch, TensorSketch

from .test_scores import policy_and_rollout  # noqa: F401 - the fixture: a tied llama and an untied qwen2 with biases

BOUND = 22  # Var <Sg, Sh> <= BOUND ||g||^2 ||h||^2 / D (THEORY.md, "The probe's sketch")


def _matrix_and_vector(shape=(5, 7), n=4):
    """A weight of ``shape`` and a vector of ``n``: parameters of both kinds (one flat score vector)."""
    return [torch.nn.Parameter(torch.zeros(shape)), torch.nn.Parameter(torch.zeros(n))]


def test_a_tensor_sketch_preserves_inner_products_on_average_within_its_variance_bound():
    """E<Sg, Sh> = <g, h> over the hashes, and the variance over 3000 hash seeds is below 22 ||g||^2 ||h||^2 / D.
    Without the signs the sketch would be biased by about 4 <g, h> here; with one hash for both sides of a square
    matrix, by sum_{j != k} G_jk H_kj (the (j, k) and (k, j) entries always collide with the same sign)."""
    params, d, reps = _matrix_and_vector((6, 6)), 8, 3000
    g = torch.linspace(0.5, 1.5, 40, dtype=torch.float64)
    h = torch.cat([torch.linspace(1.0, 0.2, 36, dtype=torch.float64).reshape(6, 6).T.reshape(-1), torch.ones(4)])
    exact = float(g @ h)
    values = np.array([float(TensorSketch(params, d, seed)(g) @ TensorSketch(params, d, seed)(h)) for seed in range(reps)])
    se = values.std(ddof=1) / math.sqrt(reps)
    assert abs(values.mean() - exact) < 4 * se, (values.mean(), exact, se)
    assert values.var(ddof=1) < BOUND * float(g @ g) * float(h @ h) / d
    gm, hm = g[:36].reshape(6, 6), h[:36].reshape(6, 6)
    one_hash_bias = float((gm * hm.T).sum() - (gm.diagonal() * hm.diagonal()).sum())
    assert 4 * se < 0.1 * one_hash_bias and 4 * se < 0.1 * (float(g.sum() * h.sum()) - exact) / d


def test_the_sketch_of_an_outer_product_is_the_convolution_of_its_sides():
    """S(u v^T) from the factors (TensorSketch.linear: one token) equals the formed matrix's sketch (__call__)."""
    params = _matrix_and_vector((5, 7))
    sketch = TensorSketch(params, 16, 3)
    u, v = torch.randn(2, 1, 5, dtype=torch.float64), torch.randn(2, 1, 7, dtype=torch.float64)
    out = torch.zeros(2, 16, dtype=torch.float64)
    sketch.linear(out, params[0], v, u)
    formed = torch.cat([(u[:, 0, :, None] * v[:, 0, None, :]).reshape(2, 35), torch.zeros(2, 4, dtype=torch.float64)], 1)
    assert torch.allclose(out, sketch(formed), atol=1e-6 * sketch(formed).abs().max())


@pytest.mark.parametrize("form_at_most", [0, workers.sketch.FORM_AT_MOST])
@pytest.mark.parametrize("which", ["all", "lm_head", "last_layers:1"])
def test_backward_sketches_equal_the_sketch_of_the_formed_scores(policy_and_rollout, which, form_at_most, monkeypatch):  # noqa: F811
    """Linear layers (square ones included: q_proj 32 x 32), a tied embedding and head, biases and RMSNorm weights:
    each completion's sketch from the backward pass equals the TensorSketch of its exact score vector (a side
    transposed, or the token sum taken after the product, breaks this by far more than float rounding), from the
    two sides' transforms (form_at_most 0) and with the small weights' gradients formed (the default: all of them
    here)."""
    monkeypatch.setattr(workers.sketch, "FORM_AT_MOST", form_at_most)
    policy, ro = policy_and_rollout
    params = select_parameters(policy.module, which)
    exact = score_vectors(policy, ro, 1.0, None, params)
    sketch = TensorSketch(params, 64, 7)
    reference = sketch(torch.as_tensor(exact)).numpy()
    for chunk in (5, 64):
        fast = score_vectors(policy, ro, 1.0, sketch, params, chunk=chunk)
        assert np.abs(reference).max() > 1e-2
        assert np.abs(fast - reference).max() <= 1e-5 * np.abs(reference).max(), np.abs(fast - reference).max()


class _LargestTensor(TorchDispatchMode):
    """The most elements of any new tensor (not a view) an op makes inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {
            a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)
        }
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:  # views are not made
                self.largest = max(self.largest, t.numel())
        return out


def test_no_weight_gradient_is_formed_and_the_parameters_are_left_as_they_were(policy_and_rollout, monkeypatch):  # noqa: F811
    """One completion a pass, every weight above FORM_AT_MOST: no tensor as large as the MLP's smallest weight
    exists, which forming that weight's gradient for one completion (the path before) needs; requires_grad is back
    and no .grad was made."""
    monkeypatch.setattr(workers.sketch, "FORM_AT_MOST", 0)
    policy, ro = policy_and_rollout
    params = [p for p in policy.module.parameters() if p.requires_grad]
    mlp = min(p.numel() for n, p in policy.module.named_parameters() if "mlp" in n)
    sketch = TensorSketch(params, 16, 0)
    one = ro.rows(slice(0, 1))
    with _LargestTensor() as seen:
        sketched_scores(policy.module, one, 1.0, params, sketch, chunk=1)
    assert seen.largest < mlp, (seen.largest, mlp)
    assert all(p.requires_grad and p.grad is None for p in params)
    with _LargestTensor() as before:
        score_vectors(policy, one, 1.0, CountSketch(sum(p.numel() for p in params), 16, 0), params, chunk=1)
    assert before.largest >= mlp  # the check can see a formed gradient


def _gram_weights(rewards: np.ndarray, field: str) -> np.ndarray:
    """w with estimate = sum_ab w_ab <s_a, s_b> (the probe's estimates are linear in the Gram matrix of the scores),
    read off by polarisation: s_a = s_b = e_1 and the rest 0."""
    k, m = rewards.shape
    n = k * m

    def value(rows: list[int]) -> float:
        s = np.zeros((n, 1))
        s[rows] = 1.0
        s = s.reshape(k, m, 1)
        return getattr(combine([prompt_stats(rewards[i], s[i]) for i in range(k)]), field)

    diag = np.array([value([a]) for a in range(n)])
    w = np.diag(diag)
    for a in range(n):
        for b in range(a + 1, n):
            w[a, b] = w[b, a] = (value([a, b]) - diag[a] - diag[b]) / 2
    return w


def test_the_probes_estimates_from_backward_sketches_stay_within_the_stated_distortion(policy_and_rollout):  # noqa: F811
    """tau2, sigma2 and kappa from sketched scores, averaged over 16 hash seeds, within 4 standard deviations of the
    unsketched values, the standard deviation bounded through the variance bound: an estimate sum_ab w_ab <s_a, s_b>
    errs by at most sqrt(22 / D) sum_ab |w_ab| ||s_a|| ||s_b|| (THEORY.md, "The probe's sketch")."""
    policy, ro = policy_and_rollout
    params = [p for p in policy.module.parameters() if p.requires_grad]
    rewards = np.random.default_rng(0).integers(0, 2, (4, 6)).astype(float)
    exact = score_vectors(policy, ro, 1.0, None, params)
    truth = combine([prompt_stats(rewards[k], exact.reshape(4, 6, -1)[k]) for k in range(4)])
    d, seeds = 256, 16
    draws = []
    for seed in range(seeds):
        s = score_vectors(policy, ro, 1.0, TensorSketch(params, d, seed), params).reshape(4, 6, -1)
        draws.append(combine([prompt_stats(rewards[k], s[k]) for k in range(4)]))
    norms = np.linalg.norm(exact, axis=1)
    for field in ("tau2", "sigma2", "kappa"):
        sd = math.sqrt(BOUND / d) * float(norms @ np.abs(_gram_weights(rewards, field)) @ norms)
        mean = np.mean([getattr(e, field) for e in draws])
        assert abs(mean - getattr(truth, field)) <= 4 * sd / math.sqrt(seeds), (field, mean, getattr(truth, field), sd)
        assert max(abs(getattr(e, field) - getattr(truth, field)) for e in draws) <= 4 * sd, field
