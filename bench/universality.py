"""Is G* universal across budgets and training time? groupscale's own measured answer (writes docs/RESULTS.md).

The seed paper (arXiv 2603.01162) claims the optimal group size depends on neither the budget B nor
the number of steps T; the IsoCompute Playbook (arXiv 2603.12151) finds the best rollouts per
problem growing with compute and with training steps. This bench measures both on groupscale's
own tasks with the real worker code (workers.entry.run_measure, one process per trial, --workers
at once) and fits them with the controller's own fit (service.results.fit_from_trials):

1. arithmetic (preset tiny-llama): B in {24, 48, 96}, G in {2, 3, 4, 6, 8, 12, 24}, 5 seeds,
   T = 150 steps, the held-out gap at 5 checkpoints (eval.every 30), the probe's estimators inside
   every trial (probe.every 50), and the probe at the starting policy (K = 256, M = 16);
2. the bandit check instance (sweeps/examples/bandit-law.yaml): gradient MSE at B = 48 and 96,
   whose exact G* = 4.205 (THEORY.md) the fit must find.

Writes a Markdown report (--out, default docs/RESULTS.md): G* per budget and checkpoint with 95%
intervals, both universality tests, probe against sweep, the command and its run time. Prints the
verdicts; the last line is ``seconds: S``. About 25 minutes on 2 cores (--quick: a 3-minute smoke run).

    .venv/bin/python bench/universality.py [--workers 2] [--out docs/RESULTS.md] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.lifecycle import TrialStatus  # noqa: E402
from service.results import fit_from_trials  # noqa: E402
from sweeps.fit import LawFit  # noqa: E402
from sweeps.planner import plan_trials  # noqa: E402
from sweeps.spec import SweepSpec  # noqa: E402
from sweeps.yamlfile import read_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BANDIT_G_STAR = 4.205  # THEORY.md check instance
ARITHMETIC = {
    "name": "universality-arithmetic",
    "task": {"name": "arithmetic", "max_operand": 49},
    "model": {"preset": "tiny-llama"},
    "group_sizes": [2, 3, 4, 6, 8, 12, 24],
    "samples_per_step": [24, 48, 96],
    "seeds": [0, 1, 2, 3, 4],
    "steps": 150,
    "grpo": {"advantage": "loo", "lr": 2.0e-4, "temperature": 1.0, "max_new_tokens": 4},
    "eval": {"prompts": 512, "every": 30},
    "probe": {"prompts": 256, "completions": 16, "every": 50},
    "resources": {"cpus_per_trial": 1},
}
IN_TRIAL_PROBE = {"prompts": 32, "completions": 8}  # probe.every inside trials: a cheap look at the moving policy
QUICK = {
    "group_sizes": [2, 4, 8, 24],
    "samples_per_step": [24, 48],
    "seeds": [0, 1],
    "steps": 30,
    "eval": {"prompts": 128, "every": 10},
    "probe": {"prompts": 64, "completions": 8, "every": 15},
}


def _run(spec_json: str, g: int, b: int, seed: int, cache: str) -> tuple[int, int, int, str, dict, dict]:
    """One trial in a fresh process: (G, B, seed, status, final metrics, {step: probe_g_star})."""
    from sweeps.trial import TrialConfig
    from workers.entry import run_measure

    spec = SweepSpec.model_validate_json(spec_json)
    probes: dict[int, float] = {}

    def report(metrics: dict, step: int) -> None:
        if "probe_g_star" in metrics:
            probes[step] = float(metrics["probe_g_star"])

    cfg = TrialConfig.for_trial(spec, g, b, seed, cache)
    if spec.probe.every:
        cfg = dataclasses.replace(cfg, probe=cfg.probe.model_copy(update=IN_TRIAL_PROBE))
    r = run_measure(cfg, report)
    return g, b, seed, r.status, r.metrics, probes


def _start_probe(spec_json: str, cache: str) -> dict:
    from sweeps.trial import TrialConfig
    from workers.probe import run_probe

    spec = SweepSpec.model_validate_json(spec_json)
    cfg = TrialConfig.for_trial(spec, spec.group_sizes[0], spec.samples_per_step[0], 0, cache)
    return run_probe(cfg, spec.probe)


def run_sweep(spec: SweepSpec, workers: int, with_probe: bool) -> tuple[list[SimpleNamespace], dict | None, float]:
    """Every trial of ``spec`` (and the starting-policy probe): (trials as the fit reads them, probe, seconds)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache, ProcessPoolExecutor(workers) as pool:
        probe = pool.submit(_start_probe, spec.model_dump_json(), cache) if with_probe else None
        futures = [
            pool.submit(_run, spec.model_dump_json(), p.group_size, p.samples_per_step, p.seed, cache) for p in plan_trials(spec)
        ]
        trials = []
        for f in futures:
            g, b, seed, status, metrics, probes = f.result()
            trials.append(
                SimpleNamespace(
                    group_size=g, samples_per_step=b, seed=seed, status=TrialStatus(status), metrics=metrics, probes=probes
                )
            )
            print(
                f"  G={g:>2} B={b:>3} seed {seed}: {status} {spec.measure.metric} "
                f"{metrics.get(spec.measure.metric, math.nan):.4g}",
                flush=True,
            )
        start_probe = probe.result() if probe is not None else None
    return trials, start_probe, time.perf_counter() - t0


def _ci(fit: LawFit) -> str:
    return _interval(fit.g_star_ci95)


def _interval(ci: list[float | None] | None) -> str:
    if not ci:
        return "-"
    return f"[{'-' if ci[0] is None else f'{ci[0]:.2f}'}, {'open' if ci[1] is None else f'{ci[1]:.2f}'}]"


def _cell(fit: LawFit) -> str:
    if fit.g_star is None:
        return f"{fit.status}" + (f" ({fit.g_star_bound['side']} {fit.g_star_bound['group_size']})" if fit.g_star_bound else "")
    return f"{fit.g_star:.2f} {_ci(fit)}"


def per_budget_table(trials: list, spec: SweepSpec) -> tuple[list[str], dict[tuple[int, int], LawFit]]:
    """G* with its 95% interval per budget (rows) and checkpoint (columns), each budget fitted on its own."""
    checkpoints = spec.eval.checkpoints(spec.steps)
    fits = {}
    head = "| B | " + " | ".join(f"T = {t}" for t in checkpoints) + " |"
    lines = [head, "|" + "---|" * (len(checkpoints) + 1)]
    for b in spec.samples_per_step:
        sub = spec.model_copy(update={"samples_per_step": [b]})
        mine = [t for t in trials if t.samples_per_step == b]
        for t in checkpoints:
            fits[b, t] = fit_from_trials(mine, sub, step=t)
        lines.append(f"| {b} | " + " | ".join(_cell(fits[b, t]) for t in checkpoints) + " |")
    return lines, fits


def probe_lines(trials: list, start: dict | None, overall: LawFit, spec: SweepSpec) -> tuple[list[str], list[str]]:
    """Probe against sweep: the starting-policy probe, the in-trial probes per step (median over trials),
    and the sweep's G* at the nearest checkpoint. Returns (Markdown lines, verdict sentences)."""
    lines, verdicts = [], []
    by_step = {s.step: s for s in overall.by_step}
    if start is not None and start.get("g_star") is not None:
        ci = start.get("g_star_ci95") or [None, None]
        lines.append(
            f"- Probe at the starting policy (K = {spec.probe.prompts}, M = {spec.probe.completions}): "
            f"G* = {start['g_star']:.2f}, 95% interval [{ci[0]:.2f}, {ci[1]:.2f}] (sampling noise at the start only); "
            f"tau2 = {start['tau2']:.3g}, sigma2 = {start['sigma2']:.3g}, kappa = {start['kappa']:.3g}; {start['seconds']:.1f} s."
        )
        for t, s in sorted(by_step.items()):
            if s.g_star_ci95 and None not in s.g_star_ci95:
                lo, hi = s.g_star_ci95
                plo, phi = ci
                overlap = plo is not None and phi is not None and plo <= hi and lo <= phi
                verdicts.append(f"T={t}: sweep [{lo:.2f}, {hi:.2f}] {'overlaps' if overlap else 'does not overlap'} the probe's")
    steps = sorted({k for t in trials for k in t.probes})
    if steps:
        lines.append("")
        lines.append("| step | probe G* in trials (median, 10%-90% over trials) | sweep G* at the nearest checkpoint |")
        lines.append("|---|---|---|")
        for k in steps:
            vals = sorted(t.probes[k] for t in trials if k in t.probes and math.isfinite(t.probes[k]))
            if not vals:
                continue
            near = min(by_step, key=lambda t: abs(t - k)) if by_step else None
            sweep = by_step[near] if near is not None else None
            q10, q90 = (float(v) for v in np.quantile(vals, [0.1, 0.9]))
            sweep_cell = "-" if sweep is None or sweep.g_star is None else f"{sweep.g_star:.2f} (T = {near})"
            lines.append(f"| {k} | {statistics.median(vals):.2f} ({q10:.2f}-{q90:.2f}, {len(vals)} trials) | {sweep_cell} |")
    return lines, verdicts


def reading(overall: LawFit, pverdicts: list[str], spec: SweepSpec) -> list[str]:
    """What the measurements say about the two claims, in words that follow the tests' outcomes."""
    uni, tuni = overall.universality, overall.time_universality
    cps, bs = spec.eval.checkpoints(spec.steps), spec.samples_per_step
    out = []
    if overall.evidence != "strong":
        out.append(
            f"- **Evidence is {overall.evidence}** ({overall.evidence_reason}): a test that does not reject here "
            'may only lack the power to, so read "consistent" below as "not shown to differ".'
        )
    if uni is None or uni.rejected is None:
        out.append("- Across budgets the test could not be made, so this run says nothing about budget independence.")
    elif uni.rejected:
        out.append(
            "- **Budgets:** one G* for every budget is rejected here: on this task and model G* depends on B, "
            "against the seed paper's claim and in the direction IsoCompute reports if G* grows with B (see the table)."
        )
    else:
        out.append(
            "- **Budgets:** one G* for every budget is consistent with the data, as the seed paper claims; "
            "within these intervals the data do not show IsoCompute's growth with compute between "
            f"B = {bs[0]} and {bs[-1]} ({uni.message})."
        )
    if tuni is None or tuni.rejected is None:
        out.append("- Across training time the test could not be made (too few checkpoints with a finite G*).")
    elif tuni.rejected:
        grows = (tuni.slope or 0) > 0
        out.append(
            f"- **Training time:** G* {'grows' if grows else 'shrinks'} with T here (slope {tuni.slope:.2g}): "
            + (
                "this agrees with IsoCompute's finding that the best rollouts per problem grow with training steps, "
                "and not with the seed paper's T-independence."
                if grows
                else "this contradicts both the seed paper's T-independence and IsoCompute's growth with steps."
            )
        )
    else:
        out.append(
            f"- **Training time:** one G* over T = {cps[0]}..{cps[-1]} is consistent with the data, as the seed paper "
            "claims; IsoCompute's growth with steps is not seen at this scale (it may need longer training or larger "
            f"models; {tuni.message})."
        )
    agree = [v for v in pverdicts if "does not" not in v]
    if pverdicts:
        out.append(
            f"- **Probe:** its interval overlaps the sweep's at {len(agree)} of {len(pverdicts)} checkpoints"
            + (f" ({'; '.join(agree)})" if agree else "")
            + ". The probe measures gradient noise at the starting policy only; the sweep measures outcome after T steps."
        )
    out.append(
        "- Scale: a ~100k-parameter model on a toy task with one learning rate for every G; this is evidence about "
        "groupscale's tasks, not about large language models."
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", default=str(ROOT / "docs" / "RESULTS.md"))
    ap.add_argument("--quick", action="store_true", help="a small smoke run (not the published numbers)")
    args = ap.parse_args()
    start = time.perf_counter()
    arith = SweepSpec.model_validate({**ARITHMETIC, **(QUICK if args.quick else {})})
    bandit = SweepSpec.model_validate(read_yaml(ROOT / "sweeps" / "examples" / "bandit-law.yaml"))
    print(f"arithmetic: {arith.n_trials} trials on {args.workers} workers", flush=True)
    trials, start_probe, arith_s = run_sweep(arith, args.workers, with_probe=True)
    overall = fit_from_trials(trials, arith)
    table, _ = per_budget_table(trials, arith)
    plines, pverdicts = probe_lines(trials, start_probe, overall, arith)
    print(f"bandit: {bandit.n_trials} trials", flush=True)
    btrials, _, bandit_s = run_sweep(bandit, args.workers, with_probe=False)
    bfit = fit_from_trials(btrials, bandit)
    bci = bfit.g_star_ci95
    bandit_covers = bool(bci) and None not in bci and bci[0] <= BANDIT_G_STAR <= bci[1]
    seconds = time.perf_counter() - start
    uni, tuni = overall.universality, overall.time_universality
    failed = sum(t.status != TrialStatus.SUCCEEDED for t in trials)
    verdict_b = uni.message if uni else "not tested (one usable budget)"
    verdict_t = tuni.message if tuni else "not tested (one checkpoint)"
    cmd = "python bench/universality.py" + (" --quick" if args.quick else "") + f" --workers {args.workers}"
    md = [
        "# Measured results: is G* universal across budgets and training time?",
        "",
        f"Produced by `{cmd}` on {platform.machine()} with {os.cpu_count()} cores in {seconds / 60:.1f} minutes "
        f"(arithmetic {arith_s / 60:.1f} min, bandit {bandit_s:.0f} s), {time.strftime('%Y-%m-%d')}."
        + (" **Quick smoke run: not the published numbers.**" if args.quick else ""),
        "Every trial ran the real worker code; every fit is the controller's own (`service.results.fit_from_trials`).",
        "",
        "## Arithmetic, tiny-llama",
        "",
        f"G in {arith.group_sizes}, B in {arith.samples_per_step}, {len(arith.seeds)} seeds, T = {arith.steps} steps, "
        f"lr {arith.grpo.lr:g}, advantage {arith.grpo.advantage}; the held-out gap at T in {arith.eval.checkpoints(arith.steps)} "
        f"({arith.eval.prompts} prompts). {len(trials)} trials, {failed} not succeeded.",
        "",
        "G* with its 95% interval, each budget fitted alone (status where the fit has no interior G*):",
        "",
        *table,
        "",
        f"All budgets together (shared rho), at the end: status {overall.status}, G* = "
        + (f"{overall.g_star:.2f} {_ci(overall)}" if overall.g_star is not None else "none")
        + f", use G = {overall.recommended_group_size}; evidence {overall.evidence}"
        + (f" ({overall.evidence_reason})" if overall.evidence_reason else "")
        + ".",
        "",
        "| T | status | G* | 95% interval | use G | evidence |",
        "|---|---|---|---|---|---|",
        *[
            f"| {s.step} | {s.status} | {'-' if s.g_star is None else f'{s.g_star:.2f}'} | "
            f"{_interval(s.g_star_ci95)} | {s.recommended_group_size or '-'} | {s.evidence} |"
            for s in overall.by_step
        ],
        "",
        f"- **Across budgets** (F-test of one shared G* against one per budget, at T = {arith.steps}): {verdict_b}.",
        f"- **Across training time** (slope of log G* on log T, bootstrap over whole trials): {verdict_t}.",
        "",
        "## What this says",
        "",
        *reading(overall, pverdicts, arith),
        "",
        "### Probe against sweep",
        "",
        *plines,
        "",
        *(f"- {v}" for v in pverdicts),
        "",
        "## Bandit check instance (exact G* = 4.205)",
        "",
        f"Gradient MSE at the starting policy, B in {bandit.samples_per_step}, G in {bandit.group_sizes}, "
        f"{len(bandit.seeds)} seeds, {bandit.measure.repeats} gradient draws per trial: status {bfit.status}, "
        f"G* = {bfit.g_star:.3f} {_ci(bfit)} (covers the exact value: {bandit_covers}); across budgets: "
        f"{bfit.universality.message if bfit.universality else 'not tested'}.",
        "",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(md))
    print("\n".join(md))
    print(f"wrote {args.out}")
    print(f"seconds: {seconds:.0f}")


if __name__ == "__main__":
    main()
