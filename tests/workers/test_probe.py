"""The probe's estimators against brute force: the U-statistic sums by explicit enumeration, the
cross-prompt term on correlated gradients, the bootstrap's resamples and the count sketch's bias."""

import itertools
import math
import warnings

import numpy as np
import pytest
import torch

from workers.probe import CountSketch, PromptStats, bootstrap_interval, combine, prompt_stats


def _h(r, s, i, j):
    """The GRPO kernel h(z_i, z_j) = (r_i - r_j)(s_i - s_j) / 2 (THEORY.md)."""
    return 0.5 * (r[i] - r[j]) * (s[i] - s[j])


@pytest.mark.parametrize("m", [4, 6])
def test_prompt_stats_equal_the_u_statistics_by_enumeration(m):
    """M = 4, the fewest completions the quadruple term allows, is accepted; 3 is refused."""
    rng = np.random.default_rng(0)
    d = 3
    r, s = rng.uniform(0, 1, m), rng.normal(size=(m, d))
    pairs = [(i, j) for i, j in itertools.permutations(range(m), 2)]
    pair = np.mean([_h(r, s, i, j) @ _h(r, s, i, j) for i, j in pairs])
    triple = np.mean([_h(r, s, i, j) @ _h(r, s, i, k) for i, j, k in itertools.permutations(range(m), 3)])
    quad = np.mean([_h(r, s, i, j) @ _h(r, s, k, q) for i, j, k, q in itertools.permutations(range(m), 4)])
    got = prompt_stats(r, s)
    assert got.g_norm2 == pytest.approx(quad, rel=1e-10)
    assert got.zeta1 == pytest.approx(triple - quad, rel=1e-10)
    assert got.zeta2 == pytest.approx(pair - quad, rel=1e-10)
    assert np.allclose(got.u, np.mean([_h(r, s, i, j) for i, j in pairs], axis=0))
    with pytest.raises(ValueError, match="at least 4 completions"):
        prompt_stats(r[:3], s[:3])


def _stats(u_rows, seed=0):
    rng = np.random.default_rng(seed)
    return [PromptStats(zeta1=rng.uniform(0.1, 0.2), zeta2=rng.uniform(0.5, 0.6), g_norm2=u @ u + 0.3, u=u) for u in u_rows]


def _brute_combine(stats, idx):
    """tau2 = mean ||g_x||^2 - mean <u_a, u_b> over resample positions a != b holding different prompts."""
    cross = [stats[a].u @ stats[b].u for a, b in itertools.product(idx, idx) if a != b]
    return (
        np.mean([stats[i].g_norm2 for i in idx]) - np.mean(cross),
        4 * np.mean([stats[i].zeta1 for i in idx]),
        np.mean([2 * stats[i].zeta2 - 4 * stats[i].zeta1 for i in idx]),
    )


@pytest.mark.parametrize("idx", [None, [0, 0, 2, 3, 3, 3], [4, 1, 1, 0, 2, 2]])
def test_combine_on_correlated_prompt_gradients_matches_brute_force(idx):
    """Per-prompt gradients that share a common direction: the cross term ||E_x g_x||^2 is large
    (the bandit's are block-orthogonal, which hides it)."""
    rng = np.random.default_rng(1)
    common = np.array([1.0, 0.5, -0.3, 0.2])
    stats = _stats([common + 0.3 * rng.normal(size=4) for _ in range(6)])
    positions = list(range(6)) if idx is None else idx
    tau2, sigma2, kappa = _brute_combine(stats, positions)
    got = combine(stats, None if idx is None else np.array(idx))
    assert got.tau2 == pytest.approx(tau2, rel=1e-10) and got.sigma2 == pytest.approx(sigma2, rel=1e-12)
    assert got.kappa == pytest.approx(kappa, rel=1e-12)
    assert np.mean([s.g_norm2 for s in stats]) - got.tau2 > 1.0  # the cross term matters here


def test_the_bootstrap_resamples_every_prompt_with_replacement():
    # prompts whose g_star differs: each resample's G* depends on which prompts it drew
    rng = np.random.default_rng(2)
    stats = _stats([rng.normal(size=3) for _ in range(8)], seed=3)
    draws_rng = np.random.default_rng(11)
    draws = [combine(stats, draws_rng.integers(0, 8, 8)).g_star for _ in range(400)]
    lo, hi = bootstrap_interval(stats, 400, seed=11)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(draws, [2.5, 97.5])))
    assert bootstrap_interval(stats, 400, seed=11, level=0.5) == pytest.approx(tuple(np.percentile(draws, [25, 75])))
    assert bootstrap_interval(stats, 0, seed=11) == (math.inf, math.inf)


def test_count_sketch_preserves_inner_products_on_average_over_hash_seeds():
    """E<Sv, Sw> = <v, w> (Charikar et al. 2002); without the random signs it would be biased by
    (1/D) sum_{p != q} v_p w_q, here about 5.5 times <v, w>."""
    p, d, reps = 40, 8, 3000
    v = torch.linspace(0.5, 1.5, p, dtype=torch.float64)
    w = torch.linspace(1.0, 0.2, p, dtype=torch.float64)
    exact = float(v @ w)
    values = np.array([float(CountSketch(p, d, seed)(v) @ CountSketch(p, d, seed)(w)) for seed in range(reps)])
    se = values.std(ddof=1) / math.sqrt(reps)
    assert abs(values.mean() - exact) < 4 * se, (values.mean(), exact, se)
    unsigned_bias = (float(v.sum() * w.sum()) - exact) / d
    assert unsigned_bias > 5 * exact and 4 * se < 0.1 * unsigned_bias  # the test can see a missing sign


def test_count_sketch_of_blocks_adds_up_to_the_sketch_of_the_whole():
    sketch = CountSketch(10, 4, seed=5)
    v = torch.arange(20, dtype=torch.float64).reshape(2, 10)
    out = torch.zeros(2, 4, dtype=torch.float64)
    sketch.add_block(out, v[:, :6], 0)
    sketch.add_block(out, v[:, 6:], 6)
    assert torch.equal(v, torch.arange(20, dtype=torch.float64).reshape(2, 10))  # the input is left as it was
    assert torch.allclose(out, sketch(v)) and torch.allclose(sketch(v)[1], sketch(v[1]))
    assert set(sketch.sign.tolist()) == {-1.0, 1.0} and sketch.bucket.max() < 4


def test_count_sketch_takes_float32_blocks_and_uses_every_bucket():
    """Scores arrive in the model's dtype (float32, bf16): a block is sketched in float64 like the whole vector,
    and the hash spreads coordinates over all D buckets, bucket 0 included."""
    sketch = CountSketch(1000, 8, seed=0)
    assert sorted(set(sketch.bucket.tolist())) == list(range(8))
    v = torch.linspace(-1, 1, 2000, dtype=torch.float32).reshape(2, 1000)
    out = sketch.add_block(torch.zeros(2, 8, dtype=torch.float64), v, 0)
    assert out.dtype == torch.float64 and torch.allclose(out, sketch(v.double()), rtol=0, atol=1e-9)
    assert v.dtype == torch.float32  # the caller's tensor is not converted in place


def _two_prompt_stats():
    """Two prompts with u = 0 (no cross term), kappa = 2 * 0.5 - 4 * 0.1 = 0.6 and ||g||^2 of 1 and -0.5: a resample of
    prompt 0 twice has tau2 = 1 (G* = 1 + sqrt(0.6)), one of each tau2 = 0.25 (G* = 1 + sqrt(2.4)), prompt 1 twice
    tau2 = -0.5 (G* = inf)."""
    return [PromptStats(zeta1=0.1, zeta2=0.5, g_norm2=g2, u=np.zeros(1)) for g2 in (1.0, -0.5)]


def _two_prompt_draws(n_boot, seed):
    """The sorted G* of each resample, by hand from the resample's prompt counts (the same numpy stream as the bootstrap)."""
    rng = np.random.default_rng(seed)
    by_ones = {0: 1 + math.sqrt(0.6), 1: 1 + math.sqrt(2.4), 2: math.inf}
    return sorted(by_ones[int(rng.integers(0, 2, 2).sum())] for _ in range(n_boot))


def test_a_percentile_on_the_last_finite_resample_is_that_resample():
    """5 resamples at level 0.5: the percentiles sit exactly on sorted draws 1 and 3 (25% and 75% of 4 gaps), no
    interpolation; with one infinite draw (sorted last) the upper end is the largest finite G*, not inf."""
    draws = _two_prompt_draws(5, seed=3)
    assert draws[3] < math.inf == draws[4]  # exactly one resample with tau2 <= 0, sorted last
    assert bootstrap_interval(_two_prompt_stats(), 5, seed=3, level=0.5) == (draws[1], draws[3])
    assert draws[1] == pytest.approx(1 + math.sqrt(0.6)) and draws[3] == pytest.approx(1 + math.sqrt(2.4))


def test_a_percentile_between_the_last_finite_and_an_infinite_resample_is_infinite():
    """5 resamples at level 0.6: the upper percentile at rank 3.2 lies between the largest finite G* and an
    infinite one, so it is inf (it was 8.99e306, interpolated towards a finite stand-in for inf)."""
    draws = _two_prompt_draws(5, seed=3)
    lo, hi = bootstrap_interval(_two_prompt_stats(), 5, seed=3, level=0.6)
    assert lo == pytest.approx(draws[0] + 0.8 * (draws[1] - draws[0]), rel=1e-14) and hi == math.inf


def test_a_percentile_halfway_to_an_infinite_resample_is_infinite():
    """3 resamples at level 0.5: the percentiles sit halfway between sorted draws 0-1 and 1-2 (positions 0.5 and 1.5);
    linear interpolation with weight 1/2 on an infinite G* is inf, and a percentile between two infinite draws is inf."""
    one_inf = _two_prompt_draws(3, seed=0)
    assert one_inf[1] < math.inf == one_inf[2]
    lo, hi = bootstrap_interval(_two_prompt_stats(), 3, seed=0, level=0.5)
    assert lo == pytest.approx((one_inf[0] + one_inf[1]) / 2, rel=1e-14) and hi == math.inf
    two_inf = _two_prompt_draws(3, seed=10)
    assert two_inf[0] < math.inf == two_inf[1] == two_inf[2]
    assert bootstrap_interval(_two_prompt_stats(), 3, seed=10, level=0.5) == (math.inf, math.inf)


def test_the_bootstrap_with_infinite_resamples_emits_no_numpy_warning():
    """Percentiles next to infinite G* draws never compute inf - inf or 0 * inf (RuntimeWarning, NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n_boot, seed in [(5, 3), (3, 0), (3, 10), (40, 1)]:
            lo, hi = bootstrap_interval(_two_prompt_stats(), n_boot, seed=seed)
            assert not math.isnan(lo) and not math.isnan(hi)
