"""The Ray backend on a real local Ray head: restarted controllers find a running trial however often they restart."""

from __future__ import annotations

import time

import pytest
import ray

from service.scheduler.ray_backend import RayBackend, _current
from service.settings import Settings
from sweeps.trial import TrialConfig

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a real Ray head and workers that import the trainer (87 s)


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    data = tmp_path_factory.mktemp("ray-backend")
    settings = Settings(data_dir=data, ray_num_cpus=2, trial_retries=0)
    b = RayBackend(settings)
    b.connect()
    yield b
    b.disconnect()


def long_trial(cache: str) -> tuple:
    """Arguments of a bandit trial that runs far longer than the test (killed at its end), logged nowhere."""
    cfg = TrialConfig.flat(
        task={"name": "bandit"},
        model={"preset": "tabular"},
        group_size=4,
        samples_per_step=16,
        seed=0,
        steps=10**7,
        cache_dir=cache,
    )
    return (cfg.to_dict(), None, None)


def test_six_restarted_controllers_each_find_the_running_trial(backend, tmp_path):
    """Each restart used to send its liveness call into the worker's 4 trial slots, which the trial's run() and the
    attaches of the earlier restarts hold until the trial ends: from the fourth restart on the call timed out and
    the trial, taken as lost, was started a second time elsewhere."""
    backend.start_trial("trial-long", long_trial(str(tmp_path)), 1.0, 0.0)
    (worker,) = backend.warm.workers.values()
    deadline = time.monotonic() + 180
    while ray.get(_current(worker.handle), timeout=180)[0] != "trial-long":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    try:
        for restart in range(6):
            controller = RayBackend(backend.settings)  # a new controller's backend (connect would clear the state dir)
            start = time.monotonic()
            names = controller.trial_names()
            assert "trial-long" in names, f"restart {restart + 1}: the running trial was taken as lost"
            assert time.monotonic() - start < 5, (
                f"restart {restart + 1}: the worker took {time.monotonic() - start:.1f} s to answer"
            )
            assert controller.attach_trial("trial-long") is not None  # its wait holds a trial slot until the trial ends
    finally:
        backend.kill_trial("trial-long")


def test_a_dead_worker_is_known_dead_at_once(backend, tmp_path):
    """A worker that died for good (killed, no restart left) is not waited for: its trial goes back to pending."""
    backend.start_trial("trial-dead", long_trial(str(tmp_path)), 1.0, 0.0)
    worker = next(w for w in backend.warm.workers.values() if w.trial == "trial-dead")
    ray.get(_current(worker.handle), timeout=180)
    ray.kill(worker.handle, no_restart=True)
    start = time.monotonic()
    assert "trial-dead" not in RayBackend(backend.settings).trial_names()
    assert time.monotonic() - start < 30
    backend.kill_trial("trial-dead")


def test_a_worker_killed_for_memory_counts_as_died_so_it_is_replaced():
    """Ray's memory monitor killed a trial's worker: the trial's own reason, and the worker is not reused."""
    import ray.exceptions

    from service.scheduler.ray_backend import RayBackend

    oom = ray.exceptions.OutOfMemoryError("Task was killed due to the node running low on memory.")
    assert RayBackend.describe(oom) == ("OutOfMemoryError: Task was killed due to the node running low on memory.", True)
    assert RayBackend.describe(ValueError("a bad reward"))[1] is False
