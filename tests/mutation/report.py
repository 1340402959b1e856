"""The kill rate of `make mutation` (mutmut) per module, and `mutation_kill_rate: X` last.

Reads mutmut's results under mutants/ (the ``.meta`` file of each mutated module). Killed: a test
failed (or timed out, or the type check caught it). Survived: every test passed, or no test ran it.
Mutants listed in tests/mutation/equivalent.toml (equivalent to the original: no test can kill them)
are shown with their reason and left out of the rate; a listed mutant that a test kills is reported as stale
(the list is wrong, or a code change renumbered the mutants). Exit 1 when a module, or the whole, is below
GOAL, or a module has stale entries.

    python tests/mutation/report.py [--survivors]
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

GOAL = 0.9
KILLED = {"killed", "timeout", "caught by type check", "segfault"}
HERE = Path(__file__).resolve().parent


def main(show_survivors: bool) -> int:
    equivalent = tomllib.loads((HERE / "equivalent.toml").read_text()).get("equivalent", {})
    metas = sorted(Path("mutants").rglob("*.py.meta"))
    if not metas:
        print("no mutmut results under mutants/: run `make mutation`", file=sys.stderr)
        return 2
    total, failing = Counter(), []
    for meta in metas:
        module = str(meta.relative_to("mutants")).removesuffix(".meta")
        status = {k: status_by_exit_code[v] for k, v in json.loads(meta.read_text())["exit_code_by_key"].items()}
        unchecked = sum(s == "not checked" for s in status.values())
        equiv = [k for k in status if k in equivalent]
        counted = {k: s for k, s in status.items() if k not in equivalent and s != "not checked"}
        killed = sum(s in KILLED for s in counted.values())
        rate = killed / len(counted) if counted else 1.0
        total.update(killed=killed, counted=len(counted))
        extra = f", {len(equiv)} equivalent" + (f", {unchecked} not checked" if unchecked else "")
        print(f"{module:24s} {killed:4d}/{len(counted):<4d} killed  kill_rate {rate:.3f}{extra}")
        if rate < GOAL:
            failing.append(module)
        if show_survivors:
            for key, s in counted.items():
                if s not in KILLED:
                    print(f"    {s}: {key}")
        for key in equiv:
            print(f"    equivalent: {key}: {equivalent[key]}")
        stale = [k for k in equiv if status[k] in KILLED]
        for key in stale:  # a test kills it, so it was never equivalent: the list is wrong, or the numbering moved
            print(f"    STALE (listed as equivalent, but killed): {key}")
        if stale:
            failing.append(module)
    rate = total["killed"] / total["counted"] if total["counted"] else 1.0
    print(f"mutation_kill_rate: {rate:.3f}")
    return 1 if failing or rate < GOAL else 0


if __name__ == "__main__":
    sys.exit(main("--survivors" in sys.argv[1:]))
