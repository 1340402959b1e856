"""`groupscale demo --keep`: the demo's sweep on the real stack, then the stack left serving until Ctrl-C."""

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.e2e.conftest import BANDIT_SWEEP

pytestmark = pytest.mark.e2e


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def _stop_what_serves(data_dir) -> None:
    """The `up` a failed demo left behind (its own session) and what it started, found by the data dir."""
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        if str(data_dir) in " ".join(p.info["cmdline"] or []):
            with contextlib.suppress(psutil.Error):
                p.kill()


def test_demo_keep_leaves_the_stack_serving_until_interrupted(tmp_path):
    spec = tmp_path / "bandit.yaml"
    spec.write_text(json.dumps({**BANDIT_SWEEP, "name": "demo-keep", "group_sizes": [2, 4, 8, 16]}))  # JSON is YAML
    cmd = [sys.executable, "-m", "service", "demo", "--keep", "--spec", str(spec), "--data-dir", str(tmp_path / "data")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    # SIGINT ignored, as in a shell's background job: the demo must still stop on Ctrl-C (it sets its own handler)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    printed, deadline = "", time.monotonic() + 300
    try:
        while "Ctrl-C stops it" not in printed:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            assert line is not None, f"demo ended (rc {proc.wait()}) before leaving the stack running:\n{printed}"
            printed += line
        api = re.search(r"API (http://127\.0\.0\.1:\d+)/docs", printed).group(1)
        mlflow = re.search(r"MLflow (http://127\.0\.0\.1:\d+);", printed).group(1)
        answer = printed.split("recommendation for task=", 1)[1].splitlines()[1]  # the answer in words, with its evidence
        assert re.match(r"(use G = \d+, (strong|weak|empirical) evidence: |no G to recommend \()", answer), printed
        assert "the stack stops now" not in printed
        sweeps = httpx.get(f"{api}/v1/sweeps", timeout=10).json()
        assert [(w["name"], w["status"]) for w in sweeps] == [("demo-keep", "succeeded")]
        assert httpx.get(f"{mlflow}/health", timeout=10).status_code == 200
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the demo stops the stack it started
        assert proc.wait(timeout=120) == 0
        for url in (f"{api}/v1/health", f"{mlflow}/health"):
            with pytest.raises(httpx.TransportError):
                httpx.get(url, timeout=5)
    finally:
        if proc.poll() is None:  # a failed assertion: Ctrl-C still makes the demo stop the stack it started
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        _stop_what_serves(tmp_path / "data")
