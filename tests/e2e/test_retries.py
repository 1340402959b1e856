"""Retry exhaustion on the real stack: a trial whose worker dies more often than GROUPSCALE_TRIAL_RETRIES
allows ends `failed` saying how often it died, and its sweep ends `failed` with that reason."""

import json
import os
import time

import pytest
from mlflow import MlflowClient

from tests.e2e.conftest import Stack
from tests.factories import spec

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # its own stack: `make test-slow` (CI runs it)
RETRIES = 1  # Ray restarts the worker once; the second death is the last


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("stack-retries"), {"GROUPSCALE_TRIAL_RETRIES": str(RETRIES)})
    s.start()
    yield s
    s.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _worker_of(stack: Stack, trial_id: str, other_than: int | None = None, timeout_s: float = 180) -> int:
    """The pid of the live worker process running ``trial_id`` (workers.worker.TrialWorker's state file),
    once it is another process than ``other_than``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = [json.loads(f.read_text()) for f in (stack.data_dir / "workers").glob("*.json")]  # written atomically
        pids = [s["pid"] for s in states if s["trial"] == f"trial-{trial_id}" and not s["done"] and s["pid"] != other_than]
        if pids and _alive(pids[0]):
            return pids[0]
        time.sleep(0.2)
    raise AssertionError(f"no worker other than {other_than} runs trial {trial_id} after {timeout_s} s: {states}")


def test_a_worker_that_dies_more_often_than_the_retries_fails_its_trial_with_the_count(stack):
    body = spec(name="e2e-retries", group_sizes=[4], steps=2000, checkpoint_every=20, eval={"prompts": 64})
    sid = stack.http.post("/v1/sweeps", json=body).json()["id"]
    deadline = time.monotonic() + 180
    while not (trials := stack.http.get(f"/v1/sweeps/{sid}/trials").json()) or trials[0]["status"] != "running":
        assert time.monotonic() < deadline, trials
        time.sleep(0.2)
    trial_id = trials[0]["id"]
    first = _worker_of(stack, trial_id)
    os.kill(first, 9)  # Ray restarts the worker (max_restarts = RETRIES) and it resumes the trial
    second = _worker_of(stack, trial_id, other_than=first)
    os.kill(second, 9)  # restarts used up: the trial's worker died RETRIES + 1 times
    sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"}, timeout_s=120)
    (trial,) = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
    assert trial["status"] == "failed" and trial["attempts"] == RETRIES + 1, trial
    assert trial["reason"].startswith(f"the worker died {RETRIES + 1} times (GROUPSCALE_TRIAL_RETRIES={RETRIES}): "), trial
    assert "RayActorError" in trial["reason"] or "ActorDiedError" in trial["reason"], trial["reason"]
    assert sweep["status"] == "failed" and f"the worker died {RETRIES + 1} times" in sweep["error"], sweep
    run = MlflowClient(stack.mlflow_uri).get_run(trial["mlflow_run_id"])
    assert run.info.status == "FAILED", run.info
