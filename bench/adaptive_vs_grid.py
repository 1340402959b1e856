"""Adaptive search (sweeps.adaptive) against the full grid: trials to reach the same G* interval width.

Task: THEORY.md's bandit check instance (20 contexts, 6 arms, seed 0) with ``measure: gradient_mse``:
each trial measures the batch-gradient MSE at the starting policy with the real worker code
(workers.entry.run_measure -> workers.gradient_mse.measure_gradient_mse). Its law is exact,
MSE(G; B) = (tau2 G + sigma2 + kappa / (G - 1)) / B, with G* = 4.205.

Per repetition r (trial seeds 1000 r, 1000 r + 1, ...; both arms draw from the same seeds):
  grid:     every G at B = 48, adding one seed to every G at a time, until sweeps.adaptive.converged
            holds for the fit of all trials so far (same law fit, same bootstrap interval, same rule);
  adaptive: ask/tell on an in-memory Optuna study with LawSampler until state().done.
The adaptive study starts from ``--initial-points`` G (default 6, AdaptiveSpec's). Prints per repetition the trial
counts, the final intervals and whether they contain 4.205, then ``adaptive_coverage: X`` and
``grid_coverage: Y`` (fractions of repetitions whose interval contains the exact G*) and, as the
last line, ``trial_ratio: R`` with R = median over repetitions of adaptive / grid trials.
About 6 s per repetition on 2 cores.

Run: .venv/bin/python bench/adaptive_vs_grid.py [--reps 20] [--repeats 25] [--tolerance 0.1] [--initial-points 6]
(README's figures: --reps 40, and --reps 40 --initial-points 4.)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sweeps import adaptive  # noqa: E402
from sweeps.fit import fit_law  # noqa: E402
from sweeps.spec import SweepSpec  # noqa: E402
from sweeps.trial import TrialConfig  # noqa: E402
from workers.entry import run_measure  # noqa: E402

EXACT_G_STAR = 4.205  # THEORY.md check instance (tests/workers/test_bandit.py)
GROUP_SIZES = [2, 3, 4, 6, 8, 12, 16, 24, 48]  # every divisor of 48 from 2 on
BUDGET = 48
MAX_GRID_SEEDS = 30


def make_spec(rep: int, repeats: int, tolerance: float, max_trials: int, initial_points: int) -> SweepSpec:
    return SweepSpec.model_validate(
        {
            "name": f"bench-adaptive-{rep}",
            "task": {"name": "bandit", "contexts": 20, "arms": 6, "seed": 0},
            "model": {"preset": "tabular"},
            "group_sizes": GROUP_SIZES,
            "samples_per_step": [BUDGET],
            "seeds": [1000 * rep],
            "steps": 1,
            "measure": {"kind": "gradient_mse", "repeats": repeats},
            "grpo": {"advantage": "loo"},
            "mode": "adaptive",
            "adaptive": {
                "max_trials": max_trials,
                "initial_points": initial_points,
                "tolerance": tolerance,
                "parallel": 1,
                "seed": rep,
            },
        }
    )


class Trials:
    """The real gradient-MSE measurement, memoised per (G, B, seed) (a trial is deterministic in its seed)."""

    def __init__(self, spec: SweepSpec, cache_dir: str) -> None:
        self.spec, self.cache_dir, self.memo, self.seconds = spec, cache_dir, {}, 0.0

    def __call__(self, g: int, b: int, seed: int) -> float:
        key = (g, b, seed)
        if key not in self.memo:
            t = time.perf_counter()
            result = run_measure(TrialConfig.for_trial(self.spec, g, b, seed, self.cache_dir))
            self.seconds += time.perf_counter() - t
            self.memo[key] = result.metrics["grad_mse"] if result.status == "succeeded" else None
        return self.memo[key]


def covers(ci: list | None) -> bool:
    return bool(ci) and None not in ci and ci[0] <= EXACT_G_STAR <= ci[1]


def run_grid(spec: SweepSpec, trial: Trials) -> tuple[int, object]:
    """Full grid, one more seed per round, until the adaptive stopping rule holds. Returns (trials, fit)."""
    rows: list[tuple[int, int, int, float]] = []
    fit = None
    for k in range(MAX_GRID_SEEDS):
        seed = spec.seeds[0] + k
        rows += [(g, b, seed, trial(g, b, seed)) for b in spec.samples_per_step for g in spec.group_sizes]
        fit = fit_law(*zip(*rows), metric=spec.measure.metric)
        if adaptive.converged(spec, rows, fit)[0]:
            break
    return len(rows), fit


def run_adaptive(spec: SweepSpec, trial: Trials) -> tuple[int, adaptive.AdaptiveState]:
    """ask/tell until done. Returns (trials asked, final state)."""
    study = adaptive.open_study(spec, None, spec.name)
    st = adaptive.state(study, spec)
    while not st.done:
        p = adaptive.ask(study, spec)
        adaptive.tell(study, p.number, trial(p.group_size, p.samples_per_step, p.seed))
        st = adaptive.state(study, spec)
    return st.n_asked, st


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=25, help="gradient draws per trial (measure.repeats)")
    ap.add_argument("--tolerance", type=float, default=0.1, help="target width W = tolerance x G*")
    ap.add_argument("--max-trials", type=int, default=200)
    ap.add_argument("--initial-points", type=int, default=6, help="adaptive.initial_points (6 is AdaptiveSpec's default)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(logging.WARNING)
    start = time.perf_counter()
    ratios, grid_cov, adaptive_cov = [], 0, 0
    with tempfile.TemporaryDirectory() as cache:
        print(
            f"bandit check instance, measure gradient_mse (repeats {args.repeats}), B={BUDGET}, G in {GROUP_SIZES}; "
            f"stop when the 95% interval width <= {args.tolerance} x G*; exact G* = {EXACT_G_STAR}"
        )
        for rep in range(args.reps):
            spec = make_spec(rep, args.repeats, args.tolerance, args.max_trials, args.initial_points)
            trial = Trials(spec, cache)
            n_grid, grid_fit = run_grid(spec, trial)
            n_ad, st = run_adaptive(spec, trial)
            gc, ac = covers(grid_fit.g_star_ci95), covers(st.fit.g_star_ci95 if st.fit else None)
            grid_cov, adaptive_cov = grid_cov + gc, adaptive_cov + ac
            ratios.append(n_ad / n_grid)
            fmt = lambda ci: "none" if not ci or None in ci else f"[{ci[0]:.2f}, {ci[1]:.2f}]"  # noqa: E731
            print(
                f"rep {rep}: grid {n_grid} trials ({n_grid // len(GROUP_SIZES)} seeds) CI {fmt(grid_fit.g_star_ci95)} "
                f"contains G*: {gc} | adaptive {n_ad} trials CI {fmt(st.fit.g_star_ci95)} contains G*: {ac} "
                f"({'converged' if '<=' in st.reason else st.reason}) | ratio {n_ad / n_grid:.2f}",
                flush=True,
            )
    print(
        f"coverage of the exact G*: grid {grid_cov}/{args.reps}, adaptive {adaptive_cov}/{args.reps}; "
        f"ratios {[round(r, 2) for r in ratios]}; {time.perf_counter() - start:.0f} s"
    )
    print(f"adaptive_coverage: {adaptive_cov / args.reps:.3f}")
    print(f"grid_coverage: {grid_cov / args.reps:.3f}")
    print(f"trial_ratio: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
