"""How often is a cheap answer right? `groupscale answer` and its rivals calibrated against full grids.

For each task of the suite the full grid (every G x 2 budgets x 5 seeds, the real worker code, one
process per trial; bench/universality.run_sweep) is the reference: its G* with 95% interval, its tie set
(sweeps.fit's equivalent_group_sizes; every G when its evidence is none) and its per-G seed-mean metric
at T (averaged over budgets). Then each cheap method, at its own cost, REPS times with other seeds:

- ``probe``: the probe at the starting policy (the answer's first stage; K x M completions);
- ``pilot``: the probe at the end of one short pilot trial (the answer's second stage; outcome tasks);
- ``adaptive``: the adaptive sweep (sweeps.adaptive, mode adaptive) at T / 10 steps, stopped at
  ADAPTIVE_SHARE of the grid's completions;
- ``answer``: `groupscale answer` at its default budget (workers.answer.run_answer);
- ``g8`` (TRL's default) and ``passrate`` (arXiv 2607.00152 on the probe's pass rate), zero-cost rules.

A method covers when its interval holds the grid's G* or its recommended G is in the grid's tie set;
its regret is the grid's seed-mean metric at its G minus that at the grid's best G. Grids are cached
under --data-dir (a JSON per task, keyed by its spec) so reruns only redo the cheap methods.

Tasks: three bandits (measure gradient_mse) whose exact G* (THEORY.md's formula) is 3.1, 6.1 and 15.6,
and the arithmetic preset at two difficulties (measure outcome). Prints the table, then
answer_coverage, answer_cost_ratio, probe_coverage, adaptive_coverage_short, regret_answer, regret_g8,
regret_passrate (over tasks x REPS); the last line is ``seconds: S``. Writes the table into
docs/RESULTS.md (--out) between the calibration markers.

    .venv/bin/python bench/calibration.py [--workers 2] [--quick] [--data-dir .groupscale/calibration] [--out docs/RESULTS.md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from service.lifecycle import TrialStatus  # noqa: E402
from service.results import fit_from_trials  # noqa: E402
from sweeps.answer import passrate_group_size  # noqa: E402
from sweeps.answer_plan import grid_cost, trial_cost  # noqa: E402
from sweeps.fit import recommend_group_size  # noqa: E402
from sweeps.spec import SweepSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REPS = 4
ADAPTIVE_SHARE = 0.05  # the adaptive sweep's completions, as a share of the grid's
BANDIT_GRID = {"group_sizes": [2, 3, 4, 6, 8, 12, 16, 24, 32, 48], "samples_per_step": [96, 192], "seeds": [0, 1, 2, 3, 4]}
BANDIT = {"model": {"preset": "tabular"}, "steps": 1, "measure": {"kind": "gradient_mse", "repeats": 200}, **BANDIT_GRID}
ARITH = {
    "model": {"preset": "tiny-llama"},
    "group_sizes": [2, 3, 4, 6, 8, 12, 16, 24],
    "samples_per_step": [48, 96],
    "seeds": [0, 1, 2, 3, 4],
    "steps": 100,
    "eval": {"prompts": 256, "every": 25},
    "resources": {"cpus_per_trial": 1},
}
TASKS = {  # name -> (spec, exact G* where known)
    "bandit-g3": (
        {
            **BANDIT,
            "task": {"name": "bandit", "contexts": 20, "arms": 2, "seed": 0},
            "grpo": {"advantage": "loo", "temperature": 1.0},
        },
        3.12,
    ),
    "bandit-g6": (
        {
            **BANDIT,
            "task": {"name": "bandit", "contexts": 10, "arms": 20, "seed": 3},
            "grpo": {"advantage": "loo", "temperature": 1.0},
        },
        6.05,
    ),
    "bandit-g16": (
        {
            **BANDIT,
            "task": {"name": "bandit", "contexts": 10, "arms": 80, "seed": 0},
            "grpo": {"advantage": "loo", "temperature": 4.0},
        },
        15.55,
    ),
    "arithmetic-easy": (
        {
            **ARITH,
            "task": {"name": "arithmetic", "max_operand": 19},
            "grpo": {"advantage": "loo", "lr": 2.0e-4, "max_new_tokens": 4},
        },
        None,
    ),
    "arithmetic-hard": (
        {
            **ARITH,
            "task": {"name": "arithmetic", "max_operand": 99},
            "grpo": {"advantage": "loo", "lr": 2.0e-4, "max_new_tokens": 4},
        },
        None,
    ),
}
QUICK = {  # per measure: a few-minute smoke run
    "gradient_mse": {"seeds": [0, 1, 2], "measure": {"kind": "gradient_mse", "repeats": 100}},
    "outcome": {"group_sizes": [2, 4, 8, 16], "seeds": [0, 1, 2], "steps": 20, "eval": {"prompts": 64, "every": 10}},
}


def task_spec(name: str, quick: bool) -> SweepSpec:
    spec, _ = TASKS[name]
    spec = {"name": f"calibration-{name}", **spec}
    if quick:
        spec.update(QUICK[spec.get("measure", {}).get("kind", "outcome")])
    return SweepSpec.model_validate(spec)


# ---- the reference: the full grid --------------------------------------------------------------------------------


def grid_reference(spec: SweepSpec, workers: int, data_dir: Path) -> dict:
    """The grid's answer, from the cache when this exact spec was run before."""
    key = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]
    path = data_dir / f"{spec.name}-{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    from universality import run_sweep

    trials, _, seconds = run_sweep(spec, workers, with_probe=False)
    fit = fit_from_trials(trials, spec)
    metric = spec.measure.metric
    means = {}
    for g in spec.group_sizes:  # seed mean per budget, then averaged over budgets
        per_b = [
            statistics.fmean(vals)
            for b in spec.samples_per_step
            if (
                vals := [
                    t.metrics[metric]
                    for t in trials
                    if (t.group_size, t.samples_per_step) == (g, b) and t.status == TrialStatus.SUCCEEDED and metric in t.metrics
                ]
            )
        ]
        if per_b:
            means[g] = statistics.fmean(per_b)
    ties = list(spec.group_sizes) if fit.evidence == "none" else (fit.equivalent_group_sizes or [fit.recommended_group_size])
    ref = {
        "g_star": fit.g_star,
        "ci95": fit.g_star_ci95,
        "status": fit.status,
        "recommended": fit.recommended_group_size,
        "tie_set": [g for g in ties if g is not None],
        "evidence": fit.evidence,
        "means": {str(g): v for g, v in means.items()},
        "best": min(means, key=means.get),
        "completions": grid_cost(spec),
        "seconds": seconds,
        "failed": sum(t.status != TrialStatus.SUCCEEDED for t in trials),
    }
    data_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ref, indent=1))
    return ref


# ---- the cheap methods ---------------------------------------------------------------------------------------------


def _adaptive(spec: SweepSpec, rep: int, cache: str) -> dict:
    """The adaptive sweep at T / 10 steps (at least 5), trial by trial, until it converges or its next trial
    would pass ADAPTIVE_SHARE of the grid's completions."""
    import optuna

    from sweeps import adaptive
    from sweeps.planner import TrialPlan
    from workers.config import TrialConfig
    from workers.entry import run_measure

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    outcome = spec.measure.kind == "outcome"
    short = max(5, spec.steps // 10) if outcome else spec.steps
    length = short if outcome else max(10, spec.measure.repeats // 10)
    sub = spec.model_copy(
        update={
            "steps": short,
            "mode": "adaptive",
            "eval": spec.eval.model_copy(update={"every": None}),
            "measure": spec.measure.model_copy(update={"repeats": length if not outcome else spec.measure.repeats}),
            "seeds": [1000 * (rep + 1) + s for s in spec.seeds],
            "adaptive": spec.adaptive.model_copy(update={"seed": rep, "max_trials": 200}),
        }
    )
    budget, spent = ADAPTIVE_SHARE * grid_cost(spec), 0
    study = adaptive.open_study(sub, None, f"calibration-{rep}")
    state = adaptive.state(study, sub)
    while not state.done:
        point = adaptive.ask(study, sub)
        cost = trial_cost(sub, length, point.samples_per_step, 2)
        if spent + cost > budget:
            study.tell(point.number, state=optuna.trial.TrialState.FAIL)
            break
        cfg = TrialConfig.from_spec(sub, TrialPlan(point.group_size, point.samples_per_step, point.seed), cache)
        result = run_measure(cfg)
        spent += cost
        adaptive.tell(study, point.number, result.metrics.get(sub.measure.metric) if result.status == "succeeded" else None)
        state = adaptive.state(study, sub)
    fit = state.fit
    out = {"cost": spent, "ci95": None, "recommended": None, "tie_set": [], "trials": state.n_complete}
    if fit is not None and fit.recommended_group_size is not None:
        out.update(
            ci95=fit.g_star_ci95,
            recommended=fit.recommended_group_size,
            tie_set=fit.equivalent_group_sizes or [fit.recommended_group_size],
        )
    return out


def cheap_methods(name: str, quick: bool, rep: int) -> dict:
    """Every cheap method on task ``name`` at repetition ``rep`` (its own seeds), in this process."""
    from workers.answer import run_answer

    spec = task_spec(name, quick)
    spec = spec.model_copy(
        update={
            "seeds": [100 * (rep + 1) + s for s in spec.seeds],
            "probe": spec.probe.model_copy(update={"seed": rep}),
        }
    )
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        ans = run_answer(spec, cache)
        t_answer = time.perf_counter() - t0
        t0 = time.perf_counter()
        adapt = _adaptive(spec, rep, cache)
        adapt["seconds"] = time.perf_counter() - t0
    stages, plan = ans["stages"], ans["stages"]["plan"]
    probe, pilot = stages["probe"], stages["pilot"]
    candidates = sorted(spec.group_sizes)
    out = {
        "answer": {
            "ci95": ans["g_star_ci95"],
            "recommended": ans["recommended_group_size"],
            "tie_set": ans["tie_set"],
            "cost": ans["cost"]["completions"],
            "seconds": t_answer,
            "g_matters": ans["g_matters"],
            "evidence": ans["evidence"],
            "g_star": ans["g_star"],
        },
        "probe": {
            "ci95": probe.get("g_star_ci95"),
            "cost": probe["samples"],
            "recommended": recommend_group_size(probe["g_star"], candidates) if probe.get("g_star") else None,
        },
        "adaptive": adapt,
        "g8": {"recommended": recommend_group_size(8.0, candidates) if 8 not in candidates else 8, "cost": 0},
        "passrate": {"recommended": ans["passrate"]["group_size"], "cost": probe["samples"], "p": ans["passrate"]["p"]},
    }
    if pilot and pilot.get("probe_g_star"):
        g = pilot["probe_g_star"]
        out["pilot"] = {
            "ci95": [g, g],
            "recommended": recommend_group_size(g, candidates),
            "cost": probe["samples"] + plan["pilot"]["cost"],
        }
    assert passrate_group_size(ans["passrate"]["p"], spec.answer.epsilon, candidates) == out["passrate"]["recommended"]
    return out


# ---- scoring and the report ----------------------------------------------------------------------------------------


def covers(method: dict, ref: dict) -> bool | None:
    """The method's interval holds the grid's G*, or its recommended G is in the grid's tie set."""
    if method.get("recommended") is None:
        return False
    ci, g = method.get("ci95"), ref["g_star"]
    inside = bool(ci and g is not None and ci[0] is not None and ci[1] is not None and ci[0] <= g <= ci[1])
    return inside or method["recommended"] in ref["tie_set"]


def regret(method: dict, ref: dict) -> float | None:
    """The grid's seed-mean metric at the method's G (the nearest grid G in log) minus at the grid's best G, as a
    share of the grid's spread (worst minus best G): unitless, so tasks of other metrics average together."""
    g = method.get("recommended")
    if g is None:
        return None
    means = {int(k): v for k, v in ref["means"].items()}
    near = min(means, key=lambda x: abs(math.log(x / g)))
    spread = max(means.values()) - min(means.values())
    return (means[near] - means[int(ref["best"])]) / spread if spread > 0 else 0.0


def _per_rep(method: str, run: dict) -> str:
    """A repetition's G; for the answer also its interval, evidence and whether G matters (yes, no, ?)."""
    if method != "answer" or run.get("recommended") is None:
        return str(run.get("recommended"))
    matters = {True: "yes", False: "no", None: "?"}[run.get("g_matters")]
    return f"{run['recommended']} ({_fmt_ci(run['ci95'])}, {run['evidence']}, matters: {matters})"


def _fmt_ci(ci) -> str:
    return "-" if not ci or None in ci else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def report(refs: dict, runs: dict, quick: bool, seconds: float, workers: int, reps: int) -> tuple[list[str], dict]:
    methods = ["answer", "probe", "pilot", "adaptive", "g8", "passrate"]
    lines = [
        f"Produced by `python bench/calibration.py --workers {workers}{' --quick' if quick else ''}` "
        f"in {seconds / 60:.1f} minutes on 2 cores, {time.strftime('%Y-%m-%d')}; {reps} repetitions of each cheap method "
        "per task (other seeds each).",
        "",
        "| task | grid G* [95%] | grid tie set | exact G* | method | G (per rep) | covers | cost / grid "
        "| regret (share of the grid's spread) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    summary: dict[str, list] = {f"{m}_{k}": [] for m in methods for k in ("cover", "cost", "regret")}
    for name, ref in refs.items():
        exact = TASKS[name][1]
        g_star = "-" if ref["g_star"] is None else f"{ref['g_star']:.2f}"
        exact_cell = "-" if exact is None else f"{exact:.2f}"
        grid = f"{g_star} {_fmt_ci(ref['ci95'])} ({ref['status']}, {ref['evidence']})"
        head = f"| {name} | {grid} | {ref['tie_set']} | {exact_cell} |"
        for m in methods:
            reps = [r[m] for r in runs[name] if m in r]
            if not reps:
                continue
            cov = [covers(r, ref) for r in reps]
            reg = [x for r in reps if (x := regret(r, ref)) is not None]
            cost = [r["cost"] / ref["completions"] for r in reps]
            summary[f"{m}_cover"] += cov
            summary[f"{m}_cost"] += cost
            summary[f"{m}_regret"] += reg
            gs = ", ".join(_per_rep(m, r) for r in reps)
            lines.append(
                f"{head} {m} | {gs} | {sum(cov)}/{len(cov)} | {statistics.fmean(cost):.4f} | {statistics.fmean(reg):.3g} |"
                if reg
                else f"{head} {m} | {gs} | {sum(cov)}/{len(cov)} | - | - |"
            )
            head = "| | | | |"
    return lines, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--tasks", nargs="*", default=list(TASKS))
    ap.add_argument("--data-dir", type=Path, default=ROOT / ".groupscale" / "calibration")
    ap.add_argument("--out", type=Path, default=None, help="write the table into this Markdown file (docs/RESULTS.md)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    refs = {}
    for name in args.tasks:
        print(f"grid {name}", flush=True)
        refs[name] = grid_reference(task_spec(name, args.quick), args.workers, args.data_dir)
    runs: dict[str, list] = {name: [] for name in args.tasks}
    with ProcessPoolExecutor(args.workers) as pool:
        jobs = {(name, rep): pool.submit(cheap_methods, name, args.quick, rep) for name in args.tasks for rep in range(args.reps)}
        for (name, rep), job in jobs.items():
            runs[name].append(job.result())
            print(f"  {name} rep {rep}: answer G = {runs[name][-1]['answer']['recommended']}", flush=True)
    seconds = time.perf_counter() - t0
    lines, summary = report(refs, runs, args.quick, seconds, args.workers, args.reps)
    print("\n".join(lines))
    if args.out:
        text = args.out.read_text() if args.out.exists() else ""
        start, end = "<!-- calibration:start -->", "<!-- calibration:end -->"
        block = "\n".join([start, "## Calibration: a cheap answer against the full grid", "", *lines, end])
        if start in text:
            text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
        else:
            text = text + "\n" + block + "\n"
        args.out.write_text(text)

    def mean(key: str) -> str:
        vals = [float(v) for v in summary[key]]
        return f"{statistics.fmean(vals):.4g}" if vals else "nan"

    print(f"answer_coverage: {mean('answer_cover')}")
    print(f"answer_cost_ratio: {mean('answer_cost')}")
    print(f"probe_coverage: {mean('probe_cover')}")
    print(f"pilot_coverage: {mean('pilot_cover')}")
    print(f"adaptive_coverage_short: {mean('adaptive_cover')}")
    print(f"adaptive_cost_ratio: {mean('adaptive_cost')}")
    print(f"regret_answer: {mean('answer_regret')}")
    print(f"regret_probe: {mean('probe_regret')}")
    print(f"regret_g8: {mean('g8_regret')}")
    print(f"regret_passrate: {mean('passrate_regret')}")
    print(f"seconds: {seconds:.0f}")


if __name__ == "__main__":
    main()
