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
