"""README's picture: the fit plot of the demo sweep (sweeps/examples/arithmetic-tiny.yaml), regenerated.

Runs the demo's 21 trials here with the real worker code (bench/universality.run_sweep, --workers at
once), fits them with the controller's own fit (service.results.fit_from_trials) and writes the plot
(sweeps.plots.plot_fit) as a small PNG. Prints G*, its interval and the evidence; the last line is
``seconds: S``. About 3 minutes on 2 cores.

    .venv/bin/python bench/readme_picture.py [--workers 2] [--out docs/assets/demo-fit.png]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from service.results import fit_from_trials  # noqa: E402
from sweeps.plots import plot_fit  # noqa: E402
from sweeps.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "assets" / "demo-fit.png")
    args = ap.parse_args()
    from universality import run_sweep

    t0 = time.perf_counter()
    spec = load_spec(ROOT / "sweeps" / "examples" / "arithmetic-tiny.yaml")
    trials, _, _ = run_sweep(spec, args.workers, with_probe=False)
    fit = fit_from_trials(trials, spec)
    fig = plot_fit(fit, "the demo sweep: arithmetic, tiny-llama, B = 48, 3 seeds, T = 150")
    fig.set_dpi(80)
    fig.savefig(args.out, format="png")
    ci = fit.g_star_ci95 or [None, None]
    print(f"status {fit.status}, G* = {fit.g_star}, 95% interval {ci}, use G = {fit.recommended_group_size}")
    print(f"evidence {fit.evidence}: {fit.evidence_reason}")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    print(f"seconds: {time.perf_counter() - t0:.0f}")


if __name__ == "__main__":
    main()
