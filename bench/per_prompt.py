"""Uniform G* against per-prompt G at the same budget, trained: what the probe's table buys on two tasks.

For each task the probe (K x M at the starting policy) gives the best uniform G and the pass-rate table; trials of
each seed then train once with every prompt at that G (``grpo.allocation: uniform``) and once with the table
(``per_prompt``: a prompt's G follows its pass rate seen so far; an unseen prompt gets the uniform G), same B, T,
seeds and learning rate. Prints the probe's predicted ratios, each allocation's final gap (mean and standard error
over seeds) and the paired difference. Not a test: a measurement (docs/RESULTS.md, "Per-prompt G").

    python bench/per_prompt.py [--tasks bandit arithmetic-small] [--seeds 10] [--null]

``--null`` checks the machinery instead: the per_prompt trials get a table with the uniform G in every part (the
trainer's probe replaced), so they differ from the uniform ones only by how the step is filled and weighted.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sweeps.allocation import BUCKET_EDGES
from sweeps.spec import ProbeSpec
from workers.engines.groupscale import TrialConfig, train_trial
from workers.probe import run_probe

TASKS = {
    # THEORY.md's check instance, trained with plain SGD (bench/bandit_outcome.py's setting)
    "bandit": dict(
        task={"name": "bandit", "contexts": 20, "arms": 6, "seed": 0},
        model={"preset": "tabular"},
        samples_per_step=48,
        steps=50,
        optimizer="sgd",
        lr=10.0,
        max_grad_norm=1e6,
    ),
    # few enough problems (operands 0..9) that each comes back often, so its pass rate is known
    "arithmetic-small": dict(
        task={"name": "arithmetic", "max_operand": 9},
        model={"preset": "tiny-llama"},
        samples_per_step=48,
        steps=150,
        lr=2e-4,
        max_new_tokens=4,
        eval={"prompts": 512},
    ),
}


def _null_tables(g: int) -> None:
    """Every per_prompt trial from here on trains with G = g in every pass-rate part (--null)."""
    from workers.engines import groupscale
    from workers.per_prompt import PerPromptG

    parts = [{"pass_rate": [lo, hi], "share": 0.2, "group_size": g} for lo, hi in zip(BUCKET_EDGES, BUCKET_EDGES[1:])]
    groupscale._allocation = lambda cfg, *_: None if cfg.grpo.allocation == "uniform" else PerPromptG(parts, g)


def compare(name: str, seeds: int, null: bool = False) -> dict:
    """The probe's block and both allocations' final gaps over ``seeds`` seeds on task ``name``."""
    settings = TASKS[name]
    probe = run_probe(TrialConfig.flat(**settings, group_size=4, seed=0), ProbeSpec(prompts=256, completions=16))
    g = probe["recommended_group_size"]
    if null:
        _null_tables(g)
    gaps: dict[str, list[float]] = {"uniform": [], "per_prompt": []}
    for seed in range(seeds):
        for allocation in gaps:
            cfg = TrialConfig.flat(**settings, group_size=g, seed=seed, allocation=allocation)
            result = train_trial(cfg)
            assert result.status == "succeeded", (name, allocation, seed, result.reason)
            gaps[allocation].append(result.metrics["gap"])
    return {"probe": probe, "g": g, "gaps": {k: np.array(v) for k, v in gaps.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--null", action="store_true", help="per_prompt trials with the uniform G in every part")
    args = ap.parse_args()
    print("| task | uniform G* | predicted mse_ratio [95% CI] | table's ratio | sGPO's ratio | gap, uniform G* | gap, table "
          "| table - uniform (paired) | seconds |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.tasks:
        start = time.perf_counter()
        out = compare(name, args.seeds, args.null)
        pp, gaps = out["probe"]["per_prompt"], out["gaps"]
        se = lambda a: np.std(a, ddof=1) / np.sqrt(len(a))  # noqa: E731
        diff = gaps["per_prompt"] - gaps["uniform"]
        ci = pp["mse_ratio_ci95"]
        print(
            f"| {name} | {out['g']} | {pp['mse_ratio']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | {pp['bucket_mse_ratio']:.3f} "
            f"| {pp['sgpo_mse_ratio']:.3f} | {gaps['uniform'].mean():.4f} ± {se(gaps['uniform']):.4f} "
            f"| {gaps['per_prompt'].mean():.4f} ± {se(gaps['per_prompt']):.4f} | {diff.mean():+.4f} ± {se(diff):.4f} "
            f"| {time.perf_counter() - start:.0f} |"
        )
        table = ", ".join(
            f"{b['pass_rate'][0]:g}-{b['pass_rate'][1]:g}: G {b['group_size']} ({b['share']:.0%})" for b in pp["buckets"]
        )
        used = f"G {out['g']} in every part (--null)" if args.null else "the table"
        print(f"<!-- {name}: probe's table {table}; the per_prompt trials trained with {used} -->")


if __name__ == "__main__":
    main()
