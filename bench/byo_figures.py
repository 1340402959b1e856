"""The figures docs/guides/your-task.md quotes for sweeps/examples/byo: what its fit says, over seed sets.

Runs the example's grid (sweeps/examples/byo/spec.yaml, the real worker code, one process per trial;
bench/universality.run_sweep) at REPS x 2 seeds at once, then fits each disjoint pair of seeds as the example
does (2 seeds): per pair the fit's status, G*, evidence, and the law-against-a-constant F-test (F, p), and the
held-out reward before and after GRPO; then the range of each over the pairs. The last line is ``seconds: S``.

    .venv/bin/python bench/byo_figures.py [--reps 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from service.results import fit_from_trials  # noqa: E402
from sweeps.fit.evidence import law_vs_flat  # noqa: E402
from sweeps.fit.points import aggregate_all  # noqa: E402
from sweeps.spec import load_spec  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "sweeps" / "examples" / "byo" / "spec.yaml"


def _f_test(trials: list) -> tuple[float, float] | None:
    """(F, p) of the law against a constant on the trials' gap (sweeps.fit.evidence.law_vs_flat)."""
    import numpy as np

    ok = [t for t in trials if "gap" in t.metrics]
    g = np.array([t.group_size for t in ok], dtype=float)
    b = np.array([t.samples_per_step for t in ok])
    y = np.array([t.metrics["gap"] for t in ok])
    data, _ = aggregate_all(g, b, y / np.abs(y).max(), np.full(y.size, np.nan))
    return law_vs_flat(data)


def _span(values: list[float], fmt: str = ".3g") -> str:
    return f"{min(values):{fmt}}-{max(values):{fmt}}" if values else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="disjoint pairs of seeds")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    from universality import run_sweep

    t0 = time.perf_counter()
    example = load_spec(SPEC)
    spec = example.model_copy(update={"seeds": list(range(2 * args.reps))})
    trials, _, _ = run_sweep(spec, args.workers, with_probe=False)
    rows = []
    for rep in range(args.reps):
        seeds = {2 * rep, 2 * rep + 1}
        pair = [t for t in trials if t.seed in seeds]
        fit = fit_from_trials(pair, example)
        test = _f_test(pair)
        before = statistics.fmean(t.metrics["eval_accuracy_initial"] for t in pair if "eval_accuracy_initial" in t.metrics)
        after = [statistics.fmean(t.metrics["eval_accuracy"] for t in pair if t.group_size == g) for g in example.group_sizes]
        rows.append((fit, test, before, after))
        f_p = "-" if test is None else f"F = {test[0]:.3g}, p = {test[1]:.2g}"
        print(
            f"seeds {sorted(seeds)}: status {fit.status}, G* {fit.g_star if fit.g_star is None else round(fit.g_star, 2)}, "
            f"recommended G {fit.recommended_group_size or '-'}, evidence {fit.evidence}; law vs constant {f_p}; "
            f"held-out reward {before:.3f} -> {_span(after)} over G",
            flush=True,
        )
    tests = [t for _, t, _, _ in rows if t is not None]
    print(f"statuses: {', '.join(sorted({f.status for f, _, _, _ in rows}))}")
    print(f"evidence: {', '.join(sorted({str(f.evidence) for f, _, _, _ in rows}))}")
    print(f"F: {_span([t[0] for t in tests])}   p: {_span([t[1] for t in tests], '.2g')}")
    print(f"held-out reward before: {_span([r[2] for r in rows])}   after: {_span([v for r in rows for v in r[3]])}")
    print(f"seconds: {time.perf_counter() - t0:.0f}")


if __name__ == "__main__":
    main()
