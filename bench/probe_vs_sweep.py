"""Probe vs sweep on the bandit: what does each cost for the same accuracy on G*?

Both estimate G* of THEORY.md's check instance (exact G* = 4.205). The probe draws K x M samples
once; the cheapest sweep that measures the same quantity is a gradient-MSE sweep (7 group sizes
x 3 seeds at B = 48, ``repeats`` batch gradients per trial). For a range of repeats we measure
the sweep's median |G* - exact| over independent repetitions and find the cheapest sweep that is
at least as accurate as the probe. Prints samples and seconds of both; the last line is
``probe_cost_ratio: X`` (probe samples / sweep samples; below 1 means the probe is cheaper).

    python bench/probe_vs_sweep.py [--reps 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sweeps.fit import fit_law
from sweeps.spec import ProbeSpec
from sweeps.trial import TrialConfig
from workers.entry import run_measure
from workers.probe import run_probe
from workers.tasks import make_task

TASK = {"name": "bandit", "contexts": 20, "arms": 6, "seed": 0}
GRID, B, SEEDS = (2, 3, 4, 6, 8, 12, 16), 48, 3
K, M = 256, 16


def cfg(**over) -> TrialConfig:
    return TrialConfig.flat(
        **{**dict(task=TASK, model={"preset": "tabular"}, group_size=2, samples_per_step=B, seed=0, steps=1), **over}
    )


def sweep_g_star(repeats: int, rep: int) -> float:
    rows = []
    for g in GRID:
        for s in range(SEEDS):
            r = run_measure(cfg(group_size=g, seed=1000 * rep + s, measure="gradient_mse", mse_repeats=repeats))
            rows.append((g, B, s, r.metrics["grad_mse"]))
    f = fit_law(*zip(*rows), n_boot=0)
    return f.g_star if f.g_star is not None else float("inf")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    exact = make_task(TASK).exact_components().g_star
    t0 = time.perf_counter()
    probe_err = [
        abs(run_probe(cfg(seed=rep), ProbeSpec(prompts=K, completions=M), n_boot=0)["g_star"] - exact) for rep in range(args.reps)
    ]
    probe_s = (time.perf_counter() - t0) / args.reps
    target = float(np.median(probe_err))
    print(f"exact G* {exact:.3f}")
    print(f"probe: {K} x {M} = {K * M} samples, {probe_s:.2f} s, median |G* error| {target:.3f}")
    sweep_samples, sweep_s = None, None
    for repeats in (5, 10, 20, 40, 80, 160, 320, 640):
        t0 = time.perf_counter()
        err = float(np.median([abs(sweep_g_star(repeats, rep) - exact) for rep in range(args.reps)]))
        seconds = (time.perf_counter() - t0) / args.reps
        samples = len(GRID) * SEEDS * repeats * B
        print(
            f"sweep: {len(GRID)} G x {SEEDS} seeds x {repeats} gradients x B={B} = {samples} samples, "
            f"{seconds:.2f} s, median |G* error| {err:.3f}"
        )
        if err <= target:
            sweep_samples, sweep_s = samples, seconds
            break
    if sweep_samples is None:
        raise SystemExit("no sweep size in the range matched the probe's accuracy")
    print(
        f"for the same accuracy: probe {K * M} samples / {probe_s:.2f} s, sweep {sweep_samples} samples / {sweep_s:.2f} s; "
        f"seconds ratio {probe_s / sweep_s:.3f}"
    )
    print(f"probe_cost_ratio: {K * M / sweep_samples:.4f}")


if __name__ == "__main__":
    main()
