"""A worker that Ray's memory monitor killed, on a real local Ray head whose kill threshold sits MARGIN above what the
machine uses now: the trial that grew says out of memory, and the next trial runs on a new worker with its own result.

Ray's monitor reads the whole machine's memory, so what other processes use moves the threshold's headroom: MARGIN is
a quarter of the memory (6 GiB here), far above what a test suite run beside this one grows by (with 2 GiB, a suite
running beside it pushed the machine over the threshold after the kill, and the next trial was killed too).

Before: the killed worker was kept warm, and every later call on it raised the same OutOfMemoryError (13 of 16 trials
after one such kill failed with that stale message)."""

from __future__ import annotations

import psutil
import pytest
import ray

from service.scheduler.ray_backend import RayBackend
from service.settings import Settings
from sweeps.trial import TrialConfig
from tests.service.test_ray_backend import long_trial
from tests.user_material import word_problem_rows, write_parquet
from workers.models.presets import preset_path

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a Ray head of its own, a chat-tiny trial and a bandit trial (~60 s)

MARGIN = min(6 << 30, psutil.virtual_memory().total // 4)
# A user's reward that grows by 128 MiB a step up to twice MARGIN; it runs in the trial's reward process and stops when
# the trial's worker is gone (its parent changes), so nothing outlives the kill.
HOG = f"""
import os, time

def hog(completions, **kwargs):
    parent, held = os.getppid(), []
    while len(held) < {2 * MARGIN >> 27} and os.getppid() == parent:
        held.append(bytearray(b"x" * (128 << 20)))
        time.sleep(0.05)
    return [0.0] * len(completions)
"""


@pytest.fixture
def backend(tmp_path, monkeypatch):
    memory = psutil.virtual_memory()
    threshold = (memory.total - memory.available + MARGIN) / memory.total
    monkeypatch.setenv("RAY_memory_usage_threshold", f"{threshold:.4f}")  # read by the head's raylet at its start
    monkeypatch.setenv("RAY_memory_monitor_refresh_ms", "100")
    b = RayBackend(Settings(data_dir=tmp_path / "data", ray_num_cpus=1, trial_retries=0))
    b.connect()
    yield b
    b.disconnect()


def test_a_worker_killed_for_memory_is_replaced_and_the_next_trial_has_its_own_result(backend, model_cache, tmp_path):
    (tmp_path / "hog.py").write_text(HOG)
    data = write_parquet(word_problem_rows(8), tmp_path / "train.parquet")
    grows = TrialConfig.flat(
        task={"name": "dataset", "path": str(data), "rewards": [{"function": f"{tmp_path / 'hog.py'}:hog"}]},
        model={"path": str(preset_path("chat-tiny", None, model_cache))},
        group_size=2,
        samples_per_step=4,
        seed=0,
        steps=2,
        eval_prompts=2,
        eval_samples_per_prompt=2,
        cache_dir=str(tmp_path / "cache"),
    )
    handle = backend.start_trial("trial-grows", (grows.to_dict(), None, None), 1.0, 0.0)
    with pytest.raises(ray.exceptions.RayError) as killed:
        backend.result(handle)
    reason, died = backend.describe(killed.value)
    # what TrialJob.collect does: a worker that died is killed for good, another is kept warm for the next trial
    backend.kill_trial("trial-grows") if died else backend.release_trial("trial-grows")

    bandit = long_trial(str(tmp_path / "cache"))[0] | {"steps": 3}
    result = backend.result(backend.start_trial("trial-next", (bandit, None, None), 1.0, 0.0))
    assert result["status"] == "succeeded", result
    assert reason.startswith("OutOfMemoryError: ") and died, reason
    assert sum(backend.pool().values()) == 1  # the killed worker is gone: the next trial had a new one
