"""Schemathesis against the real stack's OpenAPI schema: no generated request gets a server error (5xx).

POST /v1/probes is left out: it takes the same SweepSpec body as POST /v1/sweeps (so the same
validation is fuzzed there), and a probe that schemathesis happens to make valid cannot be cancelled
(there is no DELETE for probes) and would run K x M rollouts on the CPUs the rest of the session
shares. Valid sweeps it makes are cancelled as they appear, by a thread polling the list, and once
more at the end, so that none trains on.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.e2e

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
MAX_EXAMPLES = 50  # per operation and phase: ~1,300 requests, about 20 s on 2 cores
TERMINAL = {"succeeded", "failed", "cancelled"}


def _cancel_live_sweeps(http: httpx.Client) -> set[str]:
    """DELETE every sweep that has not ended; the ids of those cancelled."""
    cancelled = set()
    for sweep in http.get("/v1/sweeps", params={"limit": 1000}).json():
        if sweep["status"] not in TERMINAL:
            http.delete(f"/v1/sweeps/{sweep['id']}")
            cancelled.add(sweep["id"])
    return cancelled


class Canceller(threading.Thread):
    """Cancels sweeps while schemathesis runs, so that an accepted one never holds the CPUs for long."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.done, self.cancelled = url, threading.Event(), set()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while not self.done.wait(0.5):
                try:
                    self.cancelled |= _cancel_live_sweeps(http)
                except httpx.HTTPError:  # a busy controller: try again next round
                    pass


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # the HTTP layer is what is fuzzed: one backend
def test_no_generated_request_is_a_server_error(stack, tmp_path):
    cmd = [
        str(SCHEMATHESIS),
        "run",
        f"{stack.url}/openapi.json",
        "--checks",
        "not_a_server_error",
        "--exclude-operation-id",
        "create_probe_v1_probes_post",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        "20261130",
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--request-timeout",
        "30",
        "--no-shrink",
        "--no-color",
    ]
    canceller = Canceller(stack.url)
    canceller.start()
    started = time.monotonic()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"})
    finally:
        canceller.done.set()
        canceller.join(timeout=60)
    seconds = time.monotonic() - started
    cancelled = canceller.cancelled | _cancel_live_sweeps(stack.http)
    output = run.stdout + run.stderr
    print(output[-6000:])
    print(f"schemathesis: {seconds:.0f} s, exit {run.returncode}; sweeps it got accepted and we cancelled: {len(cancelled)}")
    assert run.returncode == 0, output[-12000:]
    counts = re.search(r"(\d+) generated, (\d+) passed", output)  # the summary line: every case passed
    assert counts and counts[1] == counts[2] and int(counts[1]) >= 500, output[-3000:]

    # Nothing it got accepted trains on: every sweep has ended, no trial is left running.
    deadline = time.monotonic() + 60
    while True:
        sweeps = stack.http.get("/v1/sweeps", params={"limit": 1000}).json()
        running = [
            (s["id"], s["status"], s["progress"]["running"])
            for s in sweeps
            if s["status"] not in TERMINAL or s["progress"]["running"]
        ]
        if not running or time.monotonic() > deadline:
            break
        _cancel_live_sweeps(stack.http)
        time.sleep(1)
    assert not running, running
    assert stack.http.get("/v1/health").status_code == 200
