"""The adaptive search of G* (sweeps.adaptive) on a synthetic metric from a known law plus noise."""

import math

import numpy as np
import pytest

from sweeps import adaptive
from sweeps.fit import fit_law
from sweeps.spec import SweepSpec

GROUPS = [2, 3, 4, 6, 8, 12, 16, 24, 48]
A, B_SLOPE, C = 0.2, 0.01, 0.09  # G* = 1 + sqrt(C / B_SLOPE) = 4
G_STAR = 4.0
REL_NOISE = 0.06


def make_spec(groups=GROUPS, budgets=(48,), **adaptive_over):
    over = {"max_trials": 120, "initial_points": 4, "tolerance": 0.15, "seed": 0, **adaptive_over}
    return SweepSpec.model_validate(
        {
            "name": "t",
            "task": {"name": "bandit"},
            "model": {"preset": "tabular"},
            "group_sizes": list(groups),
            "samples_per_step": list(budgets),
            "seeds": [0],
            "steps": 1,
            "measure": {"kind": "gradient_mse"},
            "mode": "adaptive",
            "adaptive": over,
        }
    )


def metric(g, b, seed):
    """The known law with relative noise; deterministic in (G, B, seed) like a seeded trial."""
    rng = np.random.default_rng([g, b, seed])
    return (A + B_SLOPE * g + C / (g - 1)) * (1.0 + REL_NOISE * rng.standard_normal())


def search(study, spec, f=metric, stop_after=None):
    """ask/tell until done (or until stop_after asks). Returns the points asked."""
    points = []
    while not adaptive.state(study, spec).done and (stop_after is None or len(points) < stop_after):
        p = adaptive.ask(study, spec)
        points.append(p)
        adaptive.tell(study, p.number, f(p.group_size, p.samples_per_step, p.seed))
    return points


def grid_trials(spec, f=metric):
    """The full grid, one more seed per round, under the same stopping rule."""
    rows = []
    for seed in range(30):
        rows += [(g, b, seed, f(g, b, seed)) for b in spec.samples_per_step for g in spec.group_sizes]
        if adaptive.converged(spec, rows, fit_law(*zip(*rows), metric="grad_mse"))[0]:
            return len(rows)
    raise AssertionError("the grid did not converge")


def test_log_spread_and_initial_design():
    assert adaptive.log_spread(GROUPS, 4) == [2, 6, 16, 48]
    assert adaptive.log_spread([2, 3, 4], 5) == [2, 3, 4]
    spec = make_spec(budgets=(48, 96))
    assert adaptive.initial_design(spec)[:4] == [(2, 48), (2, 96), (48, 48), (48, 96)]  # edges first, cycling budgets
    assert {g for g, _ in adaptive.initial_design(spec)} == {2, 6, 16, 48}


def test_search_converges_covers_true_g_star_with_fewer_trials_than_the_grid():
    spec = make_spec()
    study = adaptive.open_study(spec, None, "s")
    points = search(study, spec)
    st = adaptive.state(study, spec)
    assert st.done and "<=" in st.reason
    assert st.fit.status == "ok"
    lo, hi = st.fit.g_star_ci95
    assert lo < G_STAR < hi and hi - lo <= 0.15 * st.fit.g_star
    assert st.interval_width == pytest.approx(hi - lo)
    assert len(points) == st.n_asked == st.n_complete
    n_grid = grid_trials(spec)
    assert st.n_asked <= 0.6 * n_grid, (st.n_asked, n_grid)
    assert {p.group_size for p in points} <= set(GROUPS)
    seeds = {}
    for p in points:  # seeds: spec.seeds first, then max + 1, + 2, ... per (G, B)
        seeds.setdefault((p.group_size, p.samples_per_step), []).append(p.seed)
    assert all(s == list(range(len(s))) for s in seeds.values())


def test_sqlite_study_continues_after_reopening(tmp_path):
    spec = make_spec()
    url = f"sqlite:///{tmp_path / 'adaptive.db'}"
    first = search(adaptive.open_study(spec, url, "sweep-1"), spec, stop_after=9)
    # the controller dies with one trial asked but not told
    study = adaptive.open_study(spec, url, "sweep-1")
    lost = adaptive.ask(study, spec)
    del study
    study = adaptive.open_study(spec, url, "sweep-1")
    st = adaptive.state(study, spec)
    assert (st.n_complete, st.n_running, st.n_asked) == (9, 1, 10)
    assert adaptive.running_points(study) == [lost]
    nxt = adaptive.ask(study, spec)  # a new trial while the lost one is re-run: never the same point
    assert nxt.number == lost.number + 1
    assert (nxt.group_size, nxt.samples_per_step, nxt.seed) != (lost.group_size, lost.samples_per_step, lost.seed)
    adaptive.tell(study, lost.number, metric(lost.group_size, lost.samples_per_step, lost.seed))
    adaptive.tell(study, nxt.number, metric(nxt.group_size, nxt.samples_per_step, nxt.seed))
    assert adaptive.running_points(study) == []
    rest = search(study, spec)
    st = adaptive.state(adaptive.open_study(spec, url, "sweep-1"), spec)
    assert st.done and st.n_complete == len(first) + 2 + len(rest)
    assert [p.number for p in first + [lost, nxt] + rest] == list(range(st.n_asked))
    lo, hi = st.fit.g_star_ci95
    assert lo < G_STAR < hi


def test_reopening_with_another_grid_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    adaptive.open_study(make_spec(), url, "s")
    with pytest.raises(ValueError, match="was created for"):
        adaptive.open_study(make_spec(groups=[2, 4, 8, 16]), url, "s")


def test_failed_trials_are_counted_and_their_seeds_not_reused():
    spec = make_spec()
    study = adaptive.open_study(spec, None, "s")
    calls = []

    def flaky(g, b, seed):
        calls.append(1)
        return None if len(calls) % 4 == 0 else (math.nan if len(calls) == 6 else metric(g, b, seed))

    points = search(study, spec, flaky)
    st = adaptive.state(study, spec)
    assert st.done and st.fit.status == "ok"
    assert st.n_failed == sum(1 for i in range(1, len(points) + 1) if i % 4 == 0 or i == 6) > 0
    assert st.n_complete + st.n_failed == st.n_asked == len(points)
    lo, hi = st.fit.g_star_ci95
    assert lo < G_STAR < hi
    keys = [(p.group_size, p.samples_per_step, p.seed) for p in points]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("shape", ["flat", "increasing", "decreasing", "noise"])
def test_never_proposes_outside_the_allowed_set_and_stops_at_max_trials(shape):
    groups, budgets = [3, 4, 5, 6, 10, 12, 15, 20, 30, 60], (60,)
    spec = make_spec(groups=groups, budgets=budgets, max_trials=25, initial_points=5)
    f = {
        "flat": lambda g, b, s: 1.0,
        "increasing": lambda g, b, s: 0.1 * g,
        "decreasing": lambda g, b, s: 1.0 / g,
        "noise": lambda g, b, s: float(np.random.default_rng([g, b, s]).random()),
    }[shape]
    study = adaptive.open_study(spec, None, "s")
    points = search(study, spec, f)
    assert all(p.group_size in groups and p.samples_per_step in budgets for p in points)
    st = adaptive.state(study, spec)
    if shape != "noise":
        assert len(points) == 25 and st.done and "max_trials" in st.reason
    assert len({p.group_size for p in points}) >= 5
    if st.n_asked >= 25:
        with pytest.raises(RuntimeError, match="max_trials"):
            adaptive.ask(study, spec)


def test_parallel_asks_spread_out_and_count_as_running():
    spec = make_spec()
    study = adaptive.open_study(spec, None, "s")
    pts = [adaptive.ask(study, spec) for _ in range(4)]
    assert [p.group_size for p in pts] == [2, 48, 6, 16]  # the initial design, none repeated while in flight
    assert [p.number for p in pts] == [0, 1, 2, 3]
    st = adaptive.state(study, spec)
    assert (st.n_running, st.n_complete, st.done, st.fit) == (4, 0, False, None)
    adaptive.tell(study, 1, None)
    assert adaptive.running_points(study) == [pts[0], pts[2], pts[3]]
    again = adaptive.ask(study, spec)  # the failed design point is asked again with a new seed
    assert (again.group_size, again.seed) == (48, 1)


# Independent checks of the design's pieces (issue 16): the gradient of G*, the information matrix,
# the c-optimal step, trials in flight and the stopping rule at its boundary.


def _budget_fit(a=A, b=B_SLOPE, c=C):
    from sweeps.fit import BudgetFit

    return BudgetFit(samples_per_step=48, status="ok", a=a, b=b, c=c, points=[])


def test_the_gradient_of_g_star_matches_finite_differences_of_g_star_of():
    from sweeps.fit import g_star_of
    from sweeps.noise import CONSTANT

    b, c, h = 0.013, 0.07, 1e-7
    _, grad, _, _ = adaptive._variance_terms([(2, 48, 0, 1.0)], [], 48, _budget_fit(b=b, c=c), CONSTANT)
    fd = [0.0, (g_star_of(b + h, c) - g_star_of(b - h, c)) / (2 * h), (g_star_of(b, c + h) - g_star_of(b, c - h)) / (2 * h)]
    assert grad == pytest.approx(fd, rel=1e-6)


def test_the_information_matrix_counts_trials_in_flight_and_weights_by_the_noise_model():
    from sweeps.noise import NoiseModel

    noise = NoiseModel(alpha=math.log(0.01), beta=2.0)  # var = 0.01 mean^2
    rows = [(2, 48, 0, 1.0), (4, 48, 0, 1.0), (4, 96, 0, 1.0)]  # the B = 96 row is another budget's
    m, _, v, x = adaptive._variance_terms(rows, [(8, 48)], 48, _budget_fit(), noise)
    by_hand = np.zeros((3, 3))
    for g in (2.0, 4.0, 8.0):  # the completed G = 2 and 4 at B = 48, and the pending G = 8
        xg = np.array([1.0, g, 1.0 / (g - 1.0)])
        by_hand += np.outer(xg, xg) / (0.01 * (A + B_SLOPE * g + C / (g - 1.0)) ** 2)
    assert np.allclose(m, by_hand, rtol=1e-12)
    assert v(3.0) == pytest.approx(0.01 * (A + B_SLOPE * 3 + C / 2) ** 2) and list(x(3.0)) == [1.0, 3.0, 0.5]


def _law_rows(groups, seeds=2):
    return [(g, 48, s, A + B_SLOPE * g + C / (g - 1) + 1e-4 * s) for g in groups for s in range(seeds)]


def test_the_c_optimal_step_is_the_support_point_that_most_shrinks_var_g_star():
    """Brute force over the support run so far: the G whose extra trial minimises grad' M^-1 grad,
    with trials in flight in M as if done."""
    spec = make_spec(groups=GROUPS, initial_points=4)
    rows = _law_rows([2, 6, 16, 48])
    fit = fit_law(*zip(*rows), metric="grad_mse", n_boot=0)
    (bf,) = fit.per_budget
    grad = np.array([0.0, -math.sqrt(bf.c) / (2 * bf.b**1.5), 1 / (2 * math.sqrt(bf.b * bf.c))])

    def var_after(extra, pending=()):
        m = np.zeros((3, 3))
        for g in [r[0] for r in rows] + list(pending) + [extra]:
            xg = np.array([1.0, g, 1.0 / (g - 1.0)])
            m += np.outer(xg, xg) / float(fit.noise.variance(bf.a + bf.b * g + bf.c / (g - 1)))
        return float(grad @ np.linalg.pinv(m) @ grad)

    support = [2, 6, 16, 48]
    best = min(support, key=var_after)
    assert adaptive.next_point(spec, rows, [], np.random.default_rng(0)) == (best, 48)
    assert best == 2  # golden: the curvature c is pinned by the smallest G first (module docstring)
    in_flight = [2] * 6
    best_then = min(support, key=lambda g: var_after(g, in_flight))
    assert best_then != 2  # six more at G = 2 make another G the better next trial
    assert adaptive.next_point(spec, rows, [(2, 48)] * 6, np.random.default_rng(0)) == (best_then, 48)


def test_the_initial_design_skips_points_in_flight():
    spec = make_spec(initial_points=4)
    rng = np.random.default_rng(0)
    assert adaptive.next_point(spec, [], [], rng) == (2, 48)
    assert adaptive.next_point(spec, [], [(2, 48)], rng) == (48, 48)  # in flight counts as done
    assert adaptive.next_point(spec, [(2, 48, 0, 1.0)], [(48, 48), (6, 48)], rng) == (16, 48)


def _fit(g_star, ci):
    from sweeps.fit import LawFit

    return LawFit(status="ok", g_star=g_star, g_star_ci95=ci, metric="grad_mse", message="", evidence="strong")


def test_the_stopping_rule_at_its_boundaries():
    spec = make_spec(initial_points=6, tolerance=0.125)
    # 6 distinct G; 4 of them with 5 seeds and 2 with 3 seeds: 4 x 4 + 2 x 2 = 20 = MIN_REPLICATE_DOF
    rows = [(g, 48, s, 1.0) for g in (2, 3, 4, 6) for s in range(5)] + [(g, 48, s, 1.0) for g in (8, 12) for s in range(3)]
    assert adaptive.MIN_REPLICATE_DOF == 20
    assert adaptive.converged(spec, rows, _fit(4.0, [3.75, 4.25]))[0] is True  # width 0.5 = 0.125 x 4, exactly
    assert adaptive.converged(spec, rows, _fit(4.0, [3.75, 4.2500001]))[0] is False
    assert adaptive.converged(spec, rows[1:], _fit(4.0, [3.75, 4.25]))[0] is False  # 19 degrees of freedom
    five_g = [r for r in rows if r[0] != 12] + [(8, 48, s, 1.0) for s in range(3, 5)]  # 20 dof on 5 distinct G
    assert len(five_g) == 25 and adaptive.converged(spec, five_g, _fit(4.0, [3.75, 4.25]))[0] is False
    assert adaptive.converged(spec, rows, _fit(4.0, [None, 4.25]))[0] is False


def test_a_trial_that_died_inside_ask_is_failed_not_rerun():
    """RUNNING without both parameters and its seed (the controller died inside ask): marked FAIL, never listed."""
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState

    spec = make_spec()
    study = adaptive.open_study(spec, None, "s")
    handed_out = adaptive.ask(study, spec)
    bare = study.ask()  # no parameters, no seed
    no_seed = study.ask({adaptive.GROUP: CategoricalDistribution(GROUPS), adaptive.BUDGET: CategoricalDistribution([48])})
    only_group = study.ask({adaptive.GROUP: CategoricalDistribution(GROUPS)})
    only_group.set_user_attr(adaptive.SEED, 0)
    only_seed = study.ask()
    only_seed.set_user_attr(adaptive.SEED, 0)
    assert adaptive.running_points(study) == [handed_out]
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert [states[t.number] for t in (bare, no_seed, only_group, only_seed)] == [TrialState.FAIL] * 4
    assert states[handed_out.number] == TrialState.RUNNING


def test_parameters_other_than_g_and_b_are_sampled_reproducibly():
    """LawSampler proposes only (G, B); anything else is drawn from the spec's seed and the trial number."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    def draws(seed):
        spec = make_spec(seed=seed)
        study = adaptive.open_study(spec, None, "s")
        out = []
        for _ in range(3):
            t = study.ask({"x": FloatDistribution(0.0, 1.0), "arm": CategoricalDistribution(["a", "b", "c", "d"])})
            out.append((t.params["x"], t.params["arm"]))
        return out

    first, again, other = draws(0), draws(0), draws(1)
    assert first == again and first != other
    assert all(0.0 <= x <= 1.0 and arm in "abcd" for x, arm in first)
    assert len({x for x, _ in first}) == 3  # a new draw per trial


# Unit checks of the remaining pieces (mutation testing): space filling, pooling and tie-breaks of the design,
# the Optuna glue (rows, seeds, the stored grid, tell, the sampler's rng) and the state's fields and reasons.


def _add_trial(study, g, b, value, seed=None, state=None):
    """A finished trial at (G, B) added directly to ``study`` (no sampler involved)."""
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState

    state = state or TrialState.COMPLETE
    return study.add_trial(
        optuna.trial.create_trial(
            params={adaptive.GROUP: g, adaptive.BUDGET: b},
            distributions={adaptive.GROUP: CategoricalDistribution(GROUPS), adaptive.BUDGET: CategoricalDistribution([48, 96])},
            value=value if state == TrialState.COMPLETE else None,
            user_attrs={} if seed is None else {adaptive.SEED: seed},
            state=state,
        )
    )


def test_log_spread_with_as_many_or_fewer_values_than_asked_returns_them_all():
    """k >= the number of distinct values: all of them, sorted (nothing to choose); none from none."""
    assert adaptive.log_spread([8, 2, 4, 2], 3) == [2, 4, 8]
    assert adaptive.log_spread([8, 2, 4], 4) == [2, 4, 8]
    assert adaptive.log_spread([], 0) == []


def test_the_information_matrix_uses_an_intercept_of_zero_and_is_zero_without_trials():
    """A fitted a = 0 is a = 0 in the noise model's mean (v = 0.01 (b G + c/(G-1))^2 by hand); a budget with
    no trial has the 3 x 3 zero matrix (no information), not a scalar."""
    from sweeps.noise import NoiseModel

    noise = NoiseModel(alpha=math.log(0.01), beta=2.0)
    fit = _budget_fit(a=0.0)
    m, _, v, _ = adaptive._variance_terms([(2, 48, 0, 1.0)], [], 48, fit, noise)
    assert v(3.0) == pytest.approx(0.01 * (B_SLOPE * 3 + C / 2) ** 2)
    xg = np.array([1.0, 2.0, 1.0])
    assert np.allclose(m, np.outer(xg, xg) / (0.01 * (B_SLOPE * 2 + C) ** 2), rtol=1e-12)
    m0, _, _, _ = adaptive._variance_terms([(2, 48, 0, 1.0)], [], 96, fit, noise)  # nothing run at B = 96
    assert m0.shape == (3, 3) and not m0.any()


def _edge_rows(groups, seeds=2):
    """The law with G* = 1 + sqrt(0.9801 / 1e-4) = 100, beyond every grid here: the fit is 'boundary' with b, c > 0."""
    return [(g, 48, s, (0.2 + 1e-4 * g + 0.9801 / (g - 1)) * (1 + 0.01 * s)) for g in groups for s in range(seeds)]


def test_a_boundary_fit_fills_the_widest_log_gap_instead_of_the_c_optimal_step():
    """Step 2: while the budget's fit is not 'ok' (here 'boundary', although b and c > 0), the next G is the allowed
    one farthest in log G from those run. Initial design of [2, 3, 4, 8, 12, 16, 48] with 4 points: 2, 8, 16, 48
    (log_spread); by hand the fresh G are at log distances 3: log 1.5, 4: log 2, 12: log(4/3), so G = 4 for any seed."""
    groups = [2, 3, 4, 8, 12, 16, 48]
    spec = make_spec(groups=groups, initial_points=4)
    assert sorted(g for g, _ in adaptive.initial_design(spec)) == [2, 8, 16, 48]
    rows = _edge_rows([2, 8, 16, 48])
    fit = fit_law(*zip(*rows), metric="grad_mse", n_boot=0)
    (bf,) = fit.per_budget
    assert bf.status == "boundary" and bf.b > 0 and bf.c > 0
    for seed in range(5):
        assert adaptive.next_point(spec, rows, [], np.random.default_rng(seed)) == (4, 48)


def test_space_filling_is_done_at_the_first_budget_without_a_usable_fit():
    """Two budgets: B = 48 fitted 'ok' (G* = 4), B = 96 'boundary': the space-filling step is at B = 96 (G = 4, as by hand
    in the one-budget case); with both unusable, at the first of them, B = 48."""
    groups = [2, 3, 4, 8, 12, 16, 48]
    spec = make_spec(groups=groups, budgets=(48, 96), initial_points=4)
    good = [(g, 48, s, y) for g, _, s, y in _law_rows([2, 8, 16, 48])]
    edge96 = [(g, 96, s, y) for g, _, s, y in _edge_rows([2, 8, 16, 48])]
    fits = {f.samples_per_step: f.status for f in fit_law(*zip(*(good + edge96)), metric="grad_mse", n_boot=0).per_budget}
    assert fits == {48: "ok", 96: "boundary"}
    assert adaptive.next_point(spec, good + edge96, [], np.random.default_rng(0)) == (4, 96)
    edge48 = _edge_rows([2, 8, 16, 48])
    assert adaptive.next_point(spec, edge48 + edge96, [], np.random.default_rng(0)) == (4, 48)


def test_once_every_g_was_run_the_least_replicated_is_asked_again():
    """Step 2 with no fresh G left: the G with the fewest trials (completed or in flight) at that budget. Here 3
    distinct G completed (too few for the law) and G = 4 in flight once, the others twice each: G = 4."""
    groups = [2, 3, 4, 6]
    spec = make_spec(groups=groups, initial_points=4)
    rows = [(g, 48, s, 1.0 / g + 0.01 * s) for g in (2, 3, 6) for s in range(2)]
    for seed in range(5):
        assert adaptive.next_point(spec, rows, [(4, 48)], np.random.default_rng(seed)) == (4, 48)
    # a boundary fit on all four G, G = 3 with one seed only: G = 3
    rows = [r for r in _edge_rows(groups) if r[:3] != (3, 48, 1)]
    assert adaptive.next_point(spec, rows, [], np.random.default_rng(0)) == (3, 48)


@pytest.mark.parametrize(
    ("laws", "seeds", "golden"),
    [
        # G* = 4 at B = 48 (three seeds) and 8 at B = 96 (one): the budget whose G* is known less well gains most
        ({48: (0.2, 0.01, 0.09), 96: (0.1, 0.01, 0.49)}, {48: 3, 96: 1}, (2, 96)),
        # G* = 4 at B = 48 and 23, near the top of the grid, at B = 96 (two seeds each): the well-known budget wins,
        # although the pooled variance is dominated by it
        ({48: (0.2, 0.01, 0.09), 96: (0.1, 0.001, 0.49)}, {48: 2, 96: 2}, (2, 48)),
    ],
    ids=["the-less-known-budget", "the-better-known-budget"],
)
def test_across_budgets_the_c_optimal_step_pools_the_budgets_precisions(laws, seeds, golden):
    """One G* from several budgets has variance 1 / sum_k 1 / Var_k(G*) (each other budget's precision counted once),
    so the next trial is the (G, B) that most shrinks that pooled variance: brute force over the support."""
    rows = [
        (g, b, s, a + slope * g + c / (g - 1) + 2e-3 * (s - (seeds[b] - 1) / 2) * (1 + g % 5))
        for b, (a, slope, c) in laws.items()
        for g in (2, 6, 16, 48)
        for s in range(seeds[b])
    ]
    spec = make_spec(groups=GROUPS, budgets=(48, 96), initial_points=4)
    fit = fit_law(*zip(*rows), metric="grad_mse", n_boot=0)
    fits = {f.samples_per_step: f for f in fit.per_budget}
    assert {f.status for f in fits.values()} == {"ok"}

    def var_g_star(b, extra=()):
        f = fits[b]
        grad = np.array([0.0, -math.sqrt(f.c) / (2 * f.b**1.5), 1 / (2 * math.sqrt(f.b * f.c))])
        m = np.zeros((3, 3))
        for g in [r[0] for r in rows if r[1] == b] + list(extra):
            xg = np.array([1.0, g, 1.0 / (g - 1.0)])
            m += np.outer(xg, xg) / float(fit.noise.variance(f.a + f.b * g + f.c / (g - 1)))
        return float(grad @ np.linalg.pinv(m) @ grad)

    def pooled_after(point):
        g, b = point
        return 1.0 / sum(1.0 / var_g_star(k, [g] if k == b else []) for k in laws)

    best = min(((g, b) for b in laws for g in (2, 6, 16, 48)), key=pooled_after)
    assert adaptive.next_point(spec, rows, [], np.random.default_rng(0)) == best == golden


def test_exact_ties_in_the_c_optimal_step_are_broken_by_the_rng():
    """Two budgets with identical trials tie exactly at every G. The rng (tie-breaks only) decides: each candidate,
    budgets in order and then G ascending, draws one uniform u and the score is multiplied by 1 + 1e-9 u, so of the
    tied best (2, 48) and (2, 96) (the best G as in test_the_c_optimal_step_is_the_support_point_that_most_shrinks_var_g_star)
    the one with the smaller draw wins; over seeds both are chosen."""
    rows = [(g, b, s, y) for (g, _, s, y) in _law_rows([2, 6, 16, 48]) for b in (48, 96)]
    spec = make_spec(budgets=(48, 96), initial_points=4)
    chosen = set()
    for seed in range(8):
        u = np.random.default_rng(seed).random(8)  # candidates (2, 48), (6, 48), (16, 48), (48, 48), (2, 96), ...
        expected = (2, 48) if u[0] < u[4] else (2, 96)
        assert adaptive.next_point(spec, rows, [], np.random.default_rng(seed)) == expected
        chosen.add(expected)
    assert chosen == {(2, 48), (2, 96)}


def test_rows_take_the_seed_attr_else_the_trial_number_and_only_complete_finite_trials():
    """_rows: (G, B, seed, metric) of COMPLETE trials with G and a finite value; the seed is the trial's user attr,
    or its number without one. A pruned trial (whose value Optuna sets to its last intermediate value), a COMPLETE
    trial without parameters and RUNNING or FAILed ones are left out."""
    import optuna
    from optuna.trial import TrialState

    study = optuna.create_study()
    _add_trial(study, 4, 48, 0.5, seed=7)  # number 0
    _add_trial(study, 8, 96, 0.25)  # number 1, no seed attr
    _add_trial(study, 6, 48, None, seed=0, state=TrialState.FAIL)
    pruned = study.ask({adaptive.GROUP: optuna.distributions.CategoricalDistribution([2])})
    pruned.report(0.125, step=1)
    study.tell(pruned, state=TrialState.PRUNED)
    bare = study.ask()
    study.tell(bare, 1.0)
    study.ask()  # running
    trials = study.get_trials(deepcopy=False)
    assert trials[3].state == TrialState.PRUNED and trials[3].value == 0.125
    assert trials[4].state == TrialState.COMPLETE and trials[4].params == {}
    assert adaptive._rows(trials) == [(4, 48, 7, 0.5), (8, 96, 1, 0.25)]


def test_the_study_stores_its_grid_and_metric_under_the_documented_keys():
    """The study's user attr 'groupscale_grid' is {group_sizes, samples_per_step, metric}: a study stored with those keys
    (by any version) reopens with the same spec, and reopening the same storage keeps it."""
    import optuna

    spec = make_spec(budgets=(48, 96))
    storage = optuna.storages.InMemoryStorage()
    study = adaptive.open_study(spec, storage, "s")
    want = {"group_sizes": GROUPS, "samples_per_step": [48, 96], "metric": "grad_mse"}
    assert study.user_attrs[adaptive.SPEC_ATTR] == want
    again = adaptive.open_study(spec, storage, "s")
    assert again.user_attrs[adaptive.SPEC_ATTR] == want
    older = optuna.create_study(storage=storage, study_name="old")
    older.set_user_attr("groupscale_grid", dict(want))
    assert adaptive.open_study(spec, storage, "old").user_attrs[adaptive.SPEC_ATTR] == want
    with pytest.raises(ValueError, match="was created for"):
        adaptive.open_study(make_spec(budgets=(48,)), storage, "old")


def test_the_next_seed_at_a_point_skips_every_used_one_in_steps_of_one():
    """spec.seeds first (here [0]), then 1, 2, ...: the first not used at that (G, B); other points' seeds do not count."""
    import optuna

    study = optuna.create_study()
    for s in (0, 1):
        _add_trial(study, 4, 48, 1.0, seed=s)
    _add_trial(study, 8, 48, 1.0, seed=2)
    trials = study.get_trials(deepcopy=False)
    spec = make_spec()
    assert adaptive._next_seed(trials, spec, 4, 48) == 2
    assert adaptive._next_seed(trials, spec, 8, 48) == 0
    _add_trial(study, 8, 48, 1.0, seed=0)
    _add_trial(study, 8, 48, 1.0, seed=1)
    _add_trial(study, 8, 48, 1.0, seed=4)
    assert adaptive._next_seed(study.get_trials(deepcopy=False), spec, 8, 48) == 3


def test_ask_refuses_exactly_at_max_trials_and_state_stops_there():
    """max_trials = 4 (the initial design of 4 G): after 3 asks the search goes on, after the 4th state is done with the
    max_trials reason (no trial completed yet), and a 5th ask raises."""
    spec = make_spec(max_trials=4, initial_points=4)
    study = adaptive.open_study(spec, None, "s")
    for _ in range(3):
        adaptive.ask(study, spec)
    st = adaptive.state(study, spec)
    assert (st.done, st.reason, st.n_asked) == (False, "no completed trial yet", 3)
    adaptive.ask(study, spec)
    st = adaptive.state(study, spec)
    assert st.done is True and st.reason == "max_trials (4) asked before convergence; last: no completed trial yet"
    with pytest.raises(RuntimeError, match=r"^max_trials \(4\) reached$"):
        adaptive.ask(study, spec)
    assert adaptive.state(study, spec).n_asked == 4


def test_tell_and_running_points_fail_trials_explicitly_without_optuna_warnings():
    """None and non-finite values are told as FAIL (not as a missing value, for which Optuna warns 'could not be cast');
    a finite one completes the trial; a RUNNING trial without parameters is failed the same way."""
    import warnings

    from optuna.trial import TrialState

    spec = make_spec()
    study = adaptive.open_study(spec, None, "s")
    pts = [adaptive.ask(study, spec) for _ in range(3)]
    study.ask()  # died inside ask
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adaptive.tell(study, pts[0].number, None)
        adaptive.tell(study, pts[1].number, math.inf)
        adaptive.tell(study, pts[2].number, 0.75)
        assert adaptive.running_points(study) == []
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.FAIL, TrialState.COMPLETE, TrialState.FAIL]
    assert trials[2].value == 0.75


def test_the_sampler_is_reproducible_from_its_seed_through_tie_breaks():
    """A metric increasing in G keeps the fit on the lower edge, so every ask after the initial design is a space-filling
    step, most of them ties broken by the rng: the same spec seed gives the same points, another seed other points."""

    def run(seed):
        spec = make_spec(seed=seed, max_trials=30, initial_points=4)
        study = adaptive.open_study(spec, None, "s")
        pts = search(study, spec, lambda g, b, s: 0.1 * g * (1 + 0.01 * s), stop_after=30)
        return [(p.group_size, p.samples_per_step, p.seed) for p in pts]

    first = run(0)
    assert len(first) == 30 and run(0) == first and run(1) != first


def test_parameters_other_than_g_and_b_get_a_new_draw_for_each_of_many_trials():
    """A float parameter is drawn by a RandomSampler seeded from the trial: 100 trials give 100 distinct values
    (seeds from a range of 2^31, so a repeat has probability ~ 100^2 / 2^32)."""
    from optuna.distributions import FloatDistribution

    study = adaptive.open_study(make_spec(), None, "s")
    xs = [study.ask({"x": FloatDistribution(0.0, 1.0)}).params["x"] for _ in range(100)]
    assert len(set(xs)) == 100 and all(0.0 <= x <= 1.0 for x in xs)


def test_converged_explains_an_open_interval_and_a_too_wide_one():
    """The reasons, by hand: an interval open at either end or without G* is 'no closed interval yet: <fit message>';
    too wide: 'G* = 4, interval width 0.6 > 0.125 x G* (0.5)' (0.125 x 4 = 0.5)."""
    spec = make_spec(initial_points=6, tolerance=0.125)
    rows = [(g, 48, s, 1.0) for g in (2, 3, 4, 6) for s in range(5)] + [(g, 48, s, 1.0) for g in (8, 12) for s in range(3)]
    for ci, g_star in (([3.75, None], 4.0), ([None, 4.25], 4.0), ([3.75, 4.25], None)):
        fit = _fit(g_star, ci)
        fit.message = "m"
        assert adaptive.converged(spec, rows, fit) == (False, "no closed interval yet: m")
    assert adaptive.converged(spec, rows, _fit(4.0, [3.7, 4.3])) == (False, "G* = 4, interval width 0.6 > 0.125 x G* (0.5)")


def test_state_of_an_empty_study_has_no_fit_and_no_width():
    st = adaptive.state(adaptive.open_study(make_spec(), None, "s"), make_spec())
    assert (st.fit, st.done, st.reason, st.interval_width) == (None, False, "no completed trial yet", None)
    assert (st.n_complete, st.n_running, st.n_failed, st.n_asked) == (0, 0, 0, 0)


def test_state_fits_the_completed_trials_and_reports_the_interval_width():
    """state = fit_law of the completed, finite trials (sorted; a failed one left out) with the stopping rule of
    converged: 7 G x 4 seeds of the law (21 replicate degrees of freedom), tolerance 0.5."""
    from optuna.trial import TrialState

    spec = make_spec(initial_points=6, tolerance=0.5)
    study = adaptive.open_study(spec, None, "s")
    rows = sorted((g, 48, s, metric(g, 48, s)) for g in (2, 3, 4, 6, 8, 16, 48) for s in range(4))
    for g, b, s, y in rows[::-1]:
        _add_trial(study, g, b, y, seed=s)
    _add_trial(study, 12, 48, None, seed=0, state=TrialState.FAIL)
    fit = fit_law(*zip(*rows), metric="grad_mse")
    lo, hi = fit.g_star_ci95
    done, why = adaptive.converged(spec, rows, fit)
    assert done and why.endswith("<= 0.5 x G*")
    st = adaptive.state(study, spec)
    assert st.fit.g_star == pytest.approx(fit.g_star) and st.fit.g_star_ci95 == pytest.approx([lo, hi])
    assert st.interval_width == pytest.approx(hi - lo) and st.interval_width > 0
    assert (st.done, st.reason) == (True, why)
    assert (st.n_complete, st.n_failed, st.n_running, st.n_asked) == (28, 1, 0, 29)


def test_state_with_a_half_open_interval_has_no_width(monkeypatch):
    """An interval open at one end (the bootstrap's G* unbounded in some resamples) has no width and is not converged."""
    from optuna.trial import TrialState

    spec = make_spec()
    study = adaptive.open_study(spec, None, "s")
    _add_trial(study, 4, 48, 1.0, seed=0)
    _add_trial(study, 6, 48, None, seed=0, state=TrialState.FAIL)
    for ci in ([None, 5.0], [3.0, None]):
        fit = _fit(4.0, ci)
        monkeypatch.setattr(adaptive, "_fit_cached", lambda rows, metric, fit=fit: fit)
        st = adaptive.state(study, spec)
        assert (st.interval_width, st.done, st.reason) == (None, False, "no closed interval yet: ")
        assert (st.n_complete, st.n_failed, st.n_asked) == (1, 1, 2)
