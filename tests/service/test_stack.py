"""Stopping what `up` started: SIGTERM, then SIGKILL after the grace period, with the bounds README states."""

import inspect
import signal
import subprocess
import sys

import pytest

from service import stack

IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
OBEYS_SIGTERM = "import time; print('ready', flush=True); time.sleep(60)"


def _started(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"  # its handler is installed
    return proc


@pytest.mark.parametrize(("code", "ended_by"), [(IGNORES_SIGTERM, signal.SIGKILL), (OBEYS_SIGTERM, signal.SIGTERM)])
def test_a_process_group_gets_sigterm_then_sigkill_after_the_grace_period(code, ended_by):
    proc = _started(code)
    stack.stop_process_group(proc, grace_s=0.5)
    assert proc.returncode == -ended_by


def test_the_shutdown_bounds_are_readmes():
    """README: open connections get 30 s, a server 10 s after SIGTERM before SIGKILL."""
    assert stack.SHUTDOWN_GRACE_S == 30
    assert inspect.signature(stack.stop_process_group).parameters["grace_s"].default == 10.0
    assert "timeout_graceful_shutdown=SHUTDOWN_GRACE_S" in inspect.getsource(stack.run_stack)
