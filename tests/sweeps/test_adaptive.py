"""The adaptive search of G* (sweeps.adaptive) on a synthetic metric from a known law plus noise."""

import math

import numpy as np
import pytest

from sweeps import adaptive
from sweeps.law import fit_law
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
    from sweeps.law import BudgetFit

    return BudgetFit(samples_per_step=48, status="ok", a=a, b=b, c=c, points=[])


def test_the_gradient_of_g_star_matches_finite_differences_of_g_star_of():
    from sweeps.law import g_star_of
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


def test_across_budgets_the_c_optimal_step_pools_the_budgets_precisions():
    """Two budgets, each with its own law (G* = 4 at B = 48, 8 at B = 96): one G* from both has variance
    1 / sum_k 1 / Var_k(G*), so the next trial is the (G, B) that most shrinks that pooled variance (brute
    force over the support). Golden: B = 96, whose G* is known less well (one seed to three), at G = 2."""
    laws = {48: (0.2, 0.01, 0.09), 96: (0.1, 0.01, 0.49)}
    seeds = {48: 3, 96: 1}
    rows = [
        (g, b, s, a + slope * g + c / (g - 1) + 2e-3 * (s - (seeds[b] - 1) / 2) * (1 + g % 5))
        for b, (a, slope, c) in laws.items()
        for g in (2, 6, 16, 48)
        for s in range(seeds[b])
    ]
    spec = make_spec(groups=GROUPS, budgets=(48, 96), initial_points=4)
    fit = fit_law(*zip(*rows), metric="grad_mse", n_boot=0)
    fits = {f.samples_per_step: f for f in fit.per_budget}

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
    assert adaptive.next_point(spec, rows, [], np.random.default_rng(0)) == best == (2, 96)


def test_the_initial_design_skips_points_in_flight():
    spec = make_spec(initial_points=4)
    rng = np.random.default_rng(0)
    assert adaptive.next_point(spec, [], [], rng) == (2, 48)
    assert adaptive.next_point(spec, [], [(2, 48)], rng) == (48, 48)  # in flight counts as done
    assert adaptive.next_point(spec, [(2, 48, 0, 1.0)], [(48, 48), (6, 48)], rng) == (16, 48)


def _fit(g_star, ci):
    from sweeps.law import LawFit

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
