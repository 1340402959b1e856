"""Adaptive search of G*: an Optuna study whose sampler uses the law fit as its model.

``mode: adaptive`` (sweeps.spec.AdaptiveSpec) runs trials one (G, B, seed) at a time instead of the
whole grid. The model is the law of THEORY.md ("From gradient noise to outcome"), per budget B,

    metric(G) = a + b G + c / (G - 1),   G* = 1 + sqrt(c / b),

fitted exactly as a grid sweep is fitted (sweeps.fit.fit_law, with its bootstrap interval over
seeds), so the adaptive answer and the grid answer mean the same thing.

Design (LawSampler, ``next_point``):

1. Initial design: max(``initial_points``, 4) distinct G (the law needs 4; the default is 6) spread over
   ``group_sizes`` in log space, both edges included, at every budget (cycling budgets), one seed each.
2. While some budget's fit is not ``ok`` (too few distinct G, G* on an edge): the allowed G that is
   farthest in log G from the G already run at that budget; once all were run, the least replicated.
3. Then the sequential c-optimal design on the support run so far (the initial G, plus any added in
   step 2): the (G, B) whose next trial most reduces the delta-method variance of G*,
   grad(G*)' M^-1 grad(G*), M = sum_i x_i x_i' / v_i, x = [1, G, 1/(G-1)], v = the per-seed variance
   from the law fit's noise model (LawFit.noise, sweeps.noise: the one its weights come from) at the
   fitted mean; over budgets, 1 / sum_k 1/Var_k.
   Trials in flight count as if done, so parallel asks spread out. It replicates the small G
   (curvature c) most, then the middle and large G (slope b).

   Chosen by simulation (the bandit's exact law at B = 48, G in 2..48, 8% gamma noise, tolerance 0.1,
   30 repetitions, with MIN_REPLICATE_DOF = 8 (now 20); trials relative to the full grid under the same stopping
   rule, and coverage of the true G*): this design 0.33 and 28/30; a replicated sparse grid (the initial G round robin)
   0.49 and 27/30; the c-optimal step over every allowed G 0.39 and only 24/30 (it piles onto two G,
   where the linearised variance is small but the bootstrap of the 3-parameter fit is not); the
   "replicate near G*, at the interval ends and the edges" heuristic 0.59 (12 repetitions); the grid
   itself 29/30. On the real measurement (bench/adaptive_vs_grid.py, heavier-tailed noise, 40
   repetitions) the support size decides coverage: with 4 initial G the interval covered the exact
   G* in 33/40 (the fit of 3 parameters on 4 points has one residual degree of freedom, so nothing
   checks the curve between them), with 5 in 36/40, with 6 in 38/40 at a third of the grid's trials;
   MIN_REPLICATE_DOF 30 or 40 with 4 initial G did not help (35/40 at 40).

Stopping (``state``): the fit's interval is narrow enough (``converged``), or max_trials trials were asked.

The trial-level API (``open_study``, ``ask``, ``tell``, ``state``, ``running_points``) hides Optuna
from the scheduler. Trials carry params ``group_size`` and ``samples_per_step`` and the user attr
``seed``; the objective value is the trial metric (spec.measure.metric, minimised).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, count

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from sweeps.fit import BudgetFit, LawFit, fit_law, law_curve
from sweeps.noise import CONSTANT, NoiseModel
from sweeps.spec import SweepSpec

GROUP, BUDGET, SEED = "group_size", "samples_per_step", "seed"
SPEC_ATTR = "groupscale_grid"  # study user attr: the grid and metric the study was created for
MIN_REPLICATE_DOF = 20  # replicated-seed degrees of freedom needed before stopping (see converged)
Row = tuple[int, int, int, float]  # (G, B, seed, metric)


@dataclass(frozen=True)
class Point:
    """One trial to run: Optuna trial ``number`` at group size G, budget B and trial seed."""

    number: int
    group_size: int
    samples_per_step: int
    seed: int


@dataclass(frozen=True)
class AdaptiveState:
    """Where the search stands.

    Attributes:
        fit: the law fit of the completed trials (None before any completed trial).
        done: stop asking: the interval is narrow enough, or max_trials were asked.
        reason: why (not) done, for people.
        n_complete, n_running, n_failed: trials by state; n_asked counts them all.
        interval_width: ci_high - ci_low of G* (same units as G), None without a closed interval.
    """

    fit: LawFit | None
    done: bool
    reason: str
    n_complete: int
    n_running: int
    n_failed: int
    n_asked: int
    interval_width: float | None


def log_spread(values: Sequence[int], k: int) -> list[int]:
    """k distinct values of ``values`` spread evenly in log space, both edges included (sorted)."""
    vals = sorted(set(values))
    if k >= len(vals):
        return vals
    chosen: list[int] = []
    for t in np.exp(np.linspace(math.log(vals[0]), math.log(vals[-1]), k)):
        free = [v for v in vals if v not in chosen]
        chosen.append(min(free, key=lambda v: (abs(math.log(v) - math.log(t)), v)))
    return sorted(chosen)


def initial_design(spec: SweepSpec) -> list[tuple[int, int]]:
    """The initial (G, B) in order: log-spread G (edges first, then inwards), cycling budgets."""
    gs = log_spread(spec.group_sizes, spec.adaptive.initial_group_sizes(len(spec.group_sizes)))
    order = sorted(gs, key=lambda g: (min(gs.index(g), len(gs) - 1 - gs.index(g)), g))
    return [(g, b) for g in order for b in spec.samples_per_step]


def _variance_terms(rows: list[Row], pending: list[tuple[int, int]], budget: int, fit: BudgetFit, noise: NoiseModel) -> tuple:
    """(M, grad, v, x) of one budget: information matrix (3, 3) of its trials (pending ones included),
    the gradient (3,) of G* in (a, b, c), the per-seed variance v(G) = the law fit's noise model at the
    fitted mean (sweeps.fit, sweeps.noise: the one the fit weights with), and the regressors x(G)."""
    a, b, c = (float(v or 0.0) for v in (fit.a, fit.b, fit.c))  # next_point passes fits with b, c > 0
    g = [float(r[0]) for r in rows if r[1] == budget] + [float(p[0]) for p in pending if p[1] == budget]
    v = lambda gg: float(noise.variance(law_curve(gg, a, b, c)))  # noqa: E731
    x = lambda gg: np.array([1.0, gg, 1.0 / (gg - 1.0)])  # noqa: E731
    m = sum((np.outer(x(gg), x(gg)) / v(gg) for gg in g), np.zeros((3, 3)))
    grad = np.array([0.0, -math.sqrt(c) / (2 * b**1.5), 1.0 / (2 * math.sqrt(b * c))])
    return m, grad, v, x


def next_point(
    spec: SweepSpec, rows: Sequence[Row], pending: Sequence[tuple[int, int]], rng: np.random.Generator
) -> tuple[int, int]:
    """The next (G, B) to run, from spec.group_sizes x spec.samples_per_step.

    Args:
        rows: completed trials (G, B, seed, metric), the metric as fitted (lower is better).
        pending: (G, B) of trials asked but not finished (they count as if done).
        rng: tie-breaks only.
    """
    rows, pending = list(rows), list(pending)
    have = Counter([(r[0], r[1]) for r in rows] + pending)
    need: Counter[tuple[int, int]] = Counter()
    for p in initial_design(spec):  # 1. initial design, one seed per point
        need[p] += 1
        if have[p] < need[p]:
            return p
    fits, noise = {}, CONSTANT  # without replicates the variance is constant (only ratios matter for the design)
    if rows:
        fit = fit_law(*zip(*rows), metric=spec.measure.metric, n_boot=0)
        fits, noise = {f.samples_per_step: f for f in fit.per_budget}, fit.noise or CONSTANT
    unfit = [b for b in spec.samples_per_step if b not in fits or fits[b].status != "ok" or not fits[b].b or not fits[b].c]
    if unfit:  # 2. space filling in log G at the first budget without a usable fit
        b = unfit[0]
        run = {g for (g, bb) in have if bb == b}
        fresh = [g for g in spec.group_sizes if g not in run]
        if fresh:
            return max(fresh, key=lambda g: (min(abs(math.log(g / r)) for r in run) if run else 0.0, rng.random())), b
        return min(spec.group_sizes, key=lambda g: (have[(g, b)], rng.random())), b
    terms = {b: _variance_terms(rows, pending, b, fits[b], noise) for b in spec.samples_per_step}

    def var_g_star(m: np.ndarray, grad: np.ndarray) -> float:
        return float(grad @ np.linalg.pinv(m) @ grad)

    base = {b: var_g_star(t[0], t[1]) for b, t in terms.items()}
    best, best_score = None, math.inf
    for b, (m, grad, v, x) in terms.items():  # 3. the c-optimal step
        others = sum(1.0 / base[k] for k in terms if k != b)
        for g in sorted({g for (g, bb) in have if bb == b}):  # the support run so far, not every allowed G
            xi = x(float(g))
            vb = var_g_star(m + np.outer(xi, xi) / v(float(g)), grad)
            score = 1.0 / (1.0 / vb + others) * (1.0 + 1e-9 * rng.random())
            if score < best_score:
                best, best_score = (g, b), score
    assert best is not None  # every budget has a usable fit here, so at least one G was run at it
    return best


class LawSampler(BaseSampler):
    """Optuna sampler that proposes (group_size, samples_per_step) by ``next_point``.

    Search space: categorical ``group_size`` over spec.group_sizes and ``samples_per_step`` over
    spec.samples_per_step; anything else asked of it is sampled uniformly (not used by groupscale).
    """

    def __init__(self, spec: SweepSpec) -> None:
        self._spec = spec
        self._space = {GROUP: CategoricalDistribution(spec.group_sizes), BUDGET: CategoricalDistribution(spec.samples_per_step)}

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return dict(self._space)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict:
        if set(search_space) != {GROUP, BUDGET}:
            return {}
        trials = study.get_trials(deepcopy=False)
        rows = _rows(trials)
        pending = [
            (t.params[GROUP], t.params[BUDGET])
            for t in trials
            if t.state == TrialState.RUNNING and t.number != trial.number and GROUP in t.params
        ]
        rng = np.random.default_rng([self._spec.adaptive.seed, len(trials)])
        g, b = next_point(self._spec, rows, pending, rng)
        return {GROUP: g, BUDGET: b}

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution):
        rng = np.random.default_rng([self._spec.adaptive.seed, trial.number])
        if isinstance(param_distribution, CategoricalDistribution):
            return param_distribution.choices[int(rng.integers(len(param_distribution.choices)))]
        return optuna.samplers.RandomSampler(seed=int(rng.integers(2**31))).sample_independent(
            study, trial, param_name, param_distribution
        )


def _rows(trials: Sequence[FrozenTrial]) -> list[Row]:
    """Completed trials as (G, B, seed, metric) with finite metric."""
    return [
        (int(t.params[GROUP]), int(t.params[BUDGET]), int(t.user_attrs.get(SEED, t.number)), float(t.value))
        for t in trials
        if t.state == TrialState.COMPLETE and t.value is not None and math.isfinite(t.value) and GROUP in t.params
    ]


def _grid_attr(spec: SweepSpec) -> dict:
    return {"group_sizes": list(spec.group_sizes), "samples_per_step": list(spec.samples_per_step), "metric": spec.measure.metric}


def open_study(spec: SweepSpec, storage: str | optuna.storages.BaseStorage | None, study_name: str) -> optuna.Study:
    """Create the study, or load it when it exists (a restarted controller continues it).

    Args:
        storage: an SQLAlchemy URL (``sqlite:///path.db``, ``postgresql://...``), an Optuna storage,
            or None for in-memory.
        study_name: unique per sweep (e.g. the sweep id).
    Raises:
        ValueError: the stored study was created for another grid or metric.
    """
    study = optuna.create_study(
        storage=storage, study_name=study_name, sampler=LawSampler(spec), direction="minimize", load_if_exists=True
    )  # gap and grad_mse: lower is better
    stored = study.user_attrs.get(SPEC_ATTR)
    if stored is None:
        study.set_user_attr(SPEC_ATTR, _grid_attr(spec))
    elif stored != _grid_attr(spec):
        raise ValueError(f"study {study_name!r} was created for {stored}, not {_grid_attr(spec)}")
    return study


def _point(t: FrozenTrial) -> Point:
    return Point(t.number, int(t.params[GROUP]), int(t.params[BUDGET]), int(t.user_attrs[SEED]))


def _next_seed(trials: Sequence[FrozenTrial], spec: SweepSpec, g: int, b: int) -> int:
    """spec.seeds in order, then max(spec.seeds) + 1, + 2, ...: the first not used at (G, B) by any trial."""
    used = {t.user_attrs.get(SEED) for t in trials if t.params.get(GROUP) == g and t.params.get(BUDGET) == b}
    return next(s for s in chain(spec.seeds, count(max(spec.seeds) + 1)) if s not in used)


def ask(study: optuna.Study, spec: SweepSpec) -> Point:
    """A new trial: (G, B) from the LawSampler of ``study`` and the next unused seed at that (G, B).

    Trials still RUNNING (asked, never told; see ``running_points``) keep their seeds, and the
    sampler counts them as in flight. The caller keeps at most spec.adaptive.parallel in flight.
    Raises:
        RuntimeError: spec.adaptive.max_trials trials were asked already.
    """
    trials = study.get_trials(deepcopy=False)
    if len(trials) >= spec.adaptive.max_trials:
        raise RuntimeError(f"max_trials ({spec.adaptive.max_trials}) reached")
    trial = study.ask({GROUP: CategoricalDistribution(spec.group_sizes), BUDGET: CategoricalDistribution(spec.samples_per_step)})
    g, b = int(trial.params[GROUP]), int(trial.params[BUDGET])
    seed = _next_seed(trials, spec, g, b)
    trial.set_user_attr(SEED, seed)
    return Point(trial.number, g, b, seed)


def tell(study: optuna.Study, number: int, value: float | None) -> None:
    """Finish trial ``number`` with its metric; None or a non-finite value marks it FAIL."""
    if value is None or not math.isfinite(value):
        study.tell(number, state=TrialState.FAIL)
    else:
        study.tell(number, float(value))


def running_points(study: optuna.Study) -> list[Point]:
    """Trials asked but not told (e.g. the controller died): re-run them under the same number.

    A RUNNING trial without a seed died inside ``ask`` before it was handed out (nothing ran it):
    it is marked FAIL and not listed.
    """
    out = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if GROUP in t.params and BUDGET in t.params and SEED in t.user_attrs:
            out.append(_point(t))
        else:
            study.tell(t.number, state=TrialState.FAIL)
    return out


@lru_cache(maxsize=64)
def _fit_cached(rows: tuple[Row, ...], metric: str) -> LawFit:
    return fit_law(*zip(*rows), metric=metric)


def converged(spec: SweepSpec, rows: Sequence[Row], fit: LawFit) -> tuple[bool, str]:
    """The stopping rule on a fit of ``rows``: (narrow enough, why).

    Narrow enough: status ``ok``, a closed interval with ci_high - ci_low <= tolerance x G*, at least
    ``initial_points`` distinct G, and at least MIN_REPLICATE_DOF degrees of freedom of replicated
    seeds (sum over points of seeds - 1). The last guard matters: the bootstrap treats the noise
    model as known, so with a handful of seed deviations its interval is far too narrow (with one
    replicated pair, 5 trials "converged" in simulation while missing G* one time in six; 20 is
    where the bench's coverage stopped improving).
    """
    tol = spec.adaptive.tolerance
    seeds = Counter((r[0], r[1]) for r in rows)
    distinct = len({r[0] for r in rows})
    dof = sum(k - 1 for k in seeds.values())
    ci = fit.g_star_ci95
    if fit.status != "ok":
        return False, f"fit {fit.status}: {fit.message}"
    if not ci or ci[0] is None or ci[1] is None or fit.g_star is None:
        return False, "no closed interval yet: " + fit.message
    width = ci[1] - ci[0]
    if distinct < spec.adaptive.initial_points or dof < MIN_REPLICATE_DOF:
        return False, (
            f"{distinct} distinct G and {dof} replicate degrees of freedom fitted; "
            f"need {spec.adaptive.initial_points} and {MIN_REPLICATE_DOF}"
        )
    if width > tol * fit.g_star:
        return False, f"G* = {fit.g_star:.3g}, interval width {width:.3g} > {tol:g} x G* ({tol * fit.g_star:.3g})"
    return True, f"G* = {fit.g_star:.3g}, interval width {width:.3g} <= {tol:g} x G*"


def state(study: optuna.Study, spec: SweepSpec) -> AdaptiveState:
    """Fit the completed trials and decide whether to stop (``converged``, or max_trials asked)."""
    trials = study.get_trials(deepcopy=False)
    n = Counter(t.state for t in trials)
    rows = tuple(sorted(_rows(trials)))
    fit = _fit_cached(rows, spec.measure.metric) if rows else None
    width = None
    ci = fit.g_star_ci95 if fit is not None else None
    if ci and ci[0] is not None and ci[1] is not None:
        width = float(ci[1] - ci[0])
    done, why = converged(spec, rows, fit) if fit is not None else (False, "no completed trial yet")
    if not done and len(trials) >= spec.adaptive.max_trials:
        done, why = True, f"max_trials ({spec.adaptive.max_trials}) asked before convergence; last: {why}"
    return AdaptiveState(
        fit,
        done,
        why,
        n_complete=n[TrialState.COMPLETE],
        n_running=n[TrialState.RUNNING],
        n_failed=n[TrialState.FAIL],
        n_asked=len(trials),
        interval_width=width,
    )
