"""Outcome sweeps of the bandit at two budgets: does the final gap after T steps follow the law?

Trains the tabular policy of THEORY.md's check instance with GRPO (loo advantage, plain SGD, the
setting of the PL analysis) at every G for B in {48, 96} over many seeds, fits the law to the
final gap per budget and jointly (shared G*), and prints them beside the exact G* of the gradient
noise at the starting policy. Not a test: a measurement (about 1 minute on 2 cores).

    python bench/bandit_outcome.py [--seeds 20] [--steps 50] [--lr 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sweeps.fit import fit_law
from workers.engines.groupscale import TrialConfig, train_trial
from workers.tasks import make_task

GRID = (2, 3, 4, 6, 8, 12, 16)
BUDGETS = (48, 96)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--lr", type=float, default=10.0)
    args = ap.parse_args()
    task = {"name": "bandit", "contexts": 20, "arms": 6, "seed": 0}
    start = time.perf_counter()
    rows = []
    for b in BUDGETS:
        for g in GRID:
            gaps = []
            for seed in range(args.seeds):
                cfg = TrialConfig.flat(
                    task=task,
                    model={"preset": "tabular"},
                    group_size=g,
                    samples_per_step=b,
                    seed=seed,
                    steps=args.steps,
                    optimizer="sgd",
                    lr=args.lr,
                    max_grad_norm=1e6,
                )
                r = train_trial(cfg)
                rows.append((g, b, seed, r.metrics["gap"]))
                gaps.append(r.metrics["gap"])
            print(f"B={b:3d} G={g:2d} N={b // g:2d}  gap {np.mean(gaps):.4f} +- {np.std(gaps, ddof=1) / np.sqrt(len(gaps)):.4f}")
    exact = make_task(task).exact_components()
    for b in BUDGETS:
        sub = [r for r in rows if r[1] == b]
        f = fit_law(*zip(*sub))
        print(f"B={b}: status {f.status}, G* {f.g_star}, 95% CI {f.g_star_ci95}, message: {f.message}")
    f = fit_law(*zip(*rows))
    u = f.universality
    print(f"shared: status {f.status}, G* {f.g_star}, 95% CI {f.g_star_ci95}")
    print(f"universality: shared G* {u.shared_g_star}, F {u.f_statistic}, p {u.p_value}, rejected {u.rejected}")
    print(f"exact G* of the gradient noise at the start: {exact.g_star:.3f}")
    print(f"settings: {args.seeds} seeds, T={args.steps}, SGD lr={args.lr}; {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
