"""What `groupscale answer` says of sweeps/examples/byo at its default budget, over disjoint seed pairs: one story?

Runs the answer (workers.answers.run_answer, in this process: the stages the CLI's ``--local`` runs) on the example's
spec with its seeds replaced by each pair {2k, 2k + 1} (the probe, the pilot and the halving draw from them), at the
default budget (1% of the grid's completions). Per pair: the decision on the user's G (keep or move, and which G to
use), the estimate's G and interval, g_matters, the evidence and the cost; then the decisions seen and the seconds.

    .venv/bin/python bench/byo_answers.py [--reps 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sweeps.spec import load_spec  # noqa: E402
from workers.answers import run_answer  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "sweeps" / "examples" / "byo" / "spec.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="disjoint pairs of seeds")
    args = ap.parse_args()
    t0 = time.perf_counter()
    example = load_spec(SPEC)
    stories: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="byo-answers-") as cache:
        for rep in range(args.reps):
            seeds = [2 * rep, 2 * rep + 1]
            ans = run_answer(example.model_copy(update={"seeds": seeds}), Path(cache), None)
            base = ans.baseline
            story = "no G" if base is None else f"{base.action} -> use G = {base.use_group_size}"
            stories[story] += 1
            ci = ans.g_star_ci95 or [None, None]
            print(
                f"seeds {seeds}: {story}; estimate G = {ans.recommended_group_size} (G* {ans.g_star and round(ans.g_star, 2)}, "
                f"95% CI {ci}); g_matters {ans.g_matters}; evidence {ans.evidence}; "
                f"cost {ans.cost.fraction_of_grid:.2%} of the grid, {ans.cost.seconds:.0f} s",
                flush=True,
            )
            print(f"  {ans.message}", flush=True)
    print(f"stories: {dict(stories)}")
    print(f"seconds: {time.perf_counter() - t0:.0f}")


if __name__ == "__main__":
    main()
