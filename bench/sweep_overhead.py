"""How much of a sweep's wall time is its trials' own work: the bandit example and the demo sweep on the real stack.

Starts ``groupscale up`` (MLflow, a local Ray head, the controller) on free ports in a temporary data
dir, waits until its warm workers have started (``/v1/health`` workers: none ``starting``; the time
this takes, once per stack, is printed as ``warm_start_s``), submits
``sweeps/examples/bandit-law.yaml`` and then ``sweeps/examples/arithmetic-tiny.yaml`` over HTTP, one at
a time, and waits for each. For each prints the wall time (submit to end), the trials' compute seconds
(each trial's own ``seconds``: the run inside its worker, model load included) and

    overhead_ratio = wall seconds x slots / sum of the trials' compute seconds

with slots = trials that can run at once (the cluster's CPUs / cpus_per_trial, at most the trials).
1.0 means no overhead: no actor start, import or scheduling time between trials. Goal <= 1.3 on each.
A stack's first sweep on workers that are still starting pays their start (about warm_start_s) on top.

    python bench/sweep_overhead.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from sweeps.yamlfile import read_yaml  # noqa: E402
from tests.ports import free_port  # noqa: E402  (outside the ephemeral range: see tests/ports.py)

EXAMPLES = ("bandit-law.yaml", "arithmetic-tiny.yaml")


def run_sweep(http: httpx.Client, spec: dict) -> tuple[float, dict, list[dict]]:
    t0 = time.monotonic()
    sweep = http.post("/v1/sweeps", json=spec).raise_for_status().json()
    while sweep["status"] not in ("succeeded", "failed", "cancelled"):
        time.sleep(0.2)
        sweep = http.get(f"/v1/sweeps/{sweep['id']}").json()
    wall = time.monotonic() - t0
    return wall, sweep, http.get(f"/v1/sweeps/{sweep['id']}/trials").json()


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from service.stack import stop_process_group, up_command

    port, mlflow_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            up_command(port, mlflow_port, Path(tmp)),
            cwd=ROOT,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ},
        )
        try:
            http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
            t0 = time.monotonic()
            deadline = t0 + 180
            while True:
                try:
                    health = http.get("/v1/health").json()
                    workers = health.get("workers", {})
                    if health.get("ray", {}).get("ok") and workers.get("idle") and not workers.get("starting"):
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the stack and its warm workers did not come up within 180 s")
                time.sleep(0.2)
            print(f"warm_start_s: {time.monotonic() - t0:.1f} (up to warm workers: {workers})")
            cpus = float(http.get("/v1/health").json()["ray"]["detail"].split("'CPU': ")[1].split(",")[0].rstrip("}"))
            ratios = {}
            for name in EXAMPLES:
                spec = read_yaml(ROOT / "sweeps" / "examples" / name)
                wall, sweep, trials = run_sweep(http, spec)
                compute = sum(t["seconds"] or 0.0 for t in trials)
                per_trial = float(spec.get("resources", {}).get("cpus_per_trial", 1))
                slots = max(1, min(int(cpus // per_trial), len(trials)))
                ratios[name] = wall * slots / compute if compute else float("inf")
                print(
                    f"{name}: {sweep['status']}, {len(trials)} trials, wall {wall:.1f} s, {slots} slots, "
                    f"compute {compute:.1f} s (mean {compute / max(len(trials), 1):.2f} s per trial), "
                    f"overhead_ratio {ratios[name]:.2f}"
                )
        finally:
            stop_process_group(proc)
    print(f"overhead_ratio: {max(ratios.values()):.2f}")


if __name__ == "__main__":
    main()
