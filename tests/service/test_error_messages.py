"""What refusals, notes and statuses say (issue 54.7): the field the user wrote, the allowed values, nothing that did not
happen. At the HTTP layer (no Ray, SQLite store), through the CLI, and on the scheduler's tick with the fake backend."""

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service import lifecycle
from service.lifecycle import SweepStatus
from service.main import create_app
from service.settings import Settings
from service.store import Sweep
from tests.factories import spec
from tests.service.test_scheduler import FakeBackend, env, submit, tick  # noqa: F401 - env: the scheduler's fixture

SPEC = spec(name="s", task={"name": "bandit"}, model={"preset": "tabular"}, group_sizes=[2, 4, 8], samples_per_step=[48])
BYO = Path(__file__).resolve().parents[2] / "sweeps" / "examples" / "byo"


@pytest.fixture
def http(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path / "state"), run_scheduler=False)) as c:
        yield c


def _error(r):
    assert r.status_code == 422, r.text
    (d,) = r.json()["detail"]
    return d["loc"], d["msg"]


# -- sweep statuses -----------------------------------------------------------------------------------------------


def test_a_cancelled_sweep_has_no_error(env):  # noqa: F811 - the fixture imported above
    store, _, _, sched = env
    sid = submit(store)
    tick(sched)
    with store.session() as s:
        assert lifecycle.cancel_sweep(s, s.get(Sweep, sid))
    with store.read() as s:
        assert (s.get(Sweep, sid).status, s.get(Sweep, sid).error) == (SweepStatus.CANCELLED, None)


def test_a_sweep_failed_past_its_budget_says_which_trials_were_cancelled_only_when_some_were(env):  # noqa: F811
    store, backend, _, sched = env
    sid = submit(store, group_sizes=[2], seeds=[0], max_failed_trials=0)  # its one trial
    tick(sched)
    backend.fail(backend.running()[0], ValueError("reward r.py:f raised"))
    tick(sched)
    with store.read() as s:
        sweep = s.get(Sweep, sid)
        assert sweep.status == SweepStatus.FAILED
        assert sweep.error == "1 trial failed, more than max_failed_trials=0. First causes: ValueError: reward r.py:f raised"
    several = submit(store, group_sizes=[2, 4], seeds=[0, 1], max_failed_trials=0)  # 4 trials, 2 run at a time
    tick(sched)
    backend.fail(backend.running()[0], ValueError("CUDA out of memory"))
    tick(sched)
    with store.read() as s:
        error = s.get(Sweep, several).error
        assert error == (
            "1 trial failed, more than max_failed_trials=0; the 3 left were cancelled. First causes: ValueError: CUDA out "
            "of memory"
        )
