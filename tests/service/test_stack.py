"""Stopping what `up` started: SIGTERM, then SIGKILL after the grace period, with the bounds README states."""

import inspect
import os
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


@pytest.mark.parametrize(
    "uri, says",
    [
        ("ftp://host/checkpoints", "'ftp://host/checkpoints': ftp:// is not a file system"),
        ("s3://", "'s3://' names no bucket or host; allowed: a folder, or a URI such as s3://bucket/prefix"),
    ],
)
def test_up_refuses_a_storage_uri_no_file_system_takes_naming_the_setting(tmp_path, uri, says):
    env = {**os.environ, "GROUPSCALE_STORAGE_URI": uri}
    r = subprocess.run(
        [sys.executable, "-m", "service", "up", "--data-dir", str(tmp_path), "--port", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert f"GROUPSCALE_STORAGE_URI: {says}" in r.stderr


def test_storage_where_checkpoints_cannot_be_written_stops_up_before_anything_starts(s3_bucket, tmp_path):
    from service.lifetime import StackConfigError
    from service.settings import Settings
    from sweeps import storage

    stack.check_storage(Settings(data_dir=tmp_path, storage_uri=s3_bucket))  # a bucket that exists: nothing left in it
    assert storage.listing(s3_bucket) == {}
    with pytest.raises(StackConfigError, match=r"GROUPSCALE_STORAGE_URI: 's3://no-such-bucket-x': checkpoints cannot be written"):
        stack.check_storage(Settings(data_dir=tmp_path, storage_uri="s3://no-such-bucket-x"))
