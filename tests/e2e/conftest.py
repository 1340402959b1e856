"""The real stack for end-to-end tests: `groupscale up` (MLflow server, local Ray, controller) on free ports."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from service.stack import StackError, stop_process_group, up_command, wait_until_up
from sweeps.fit import fit_law
from tests.factories import bandit_spec
from tests.ports import free_port

# A Ray head of its own, as on a cluster, kept on loopback: Ray resolves 127.0.0.1 to the host's
# address unless told this is a one-node setup; token auth is off for the test head.
RAY_LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}


class RayHead:
    """`ray start --head --block` in its own process group, so that it outlives a killed controller."""

    def __init__(self, log_dir: Path, num_cpus: int = 2) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = log_dir / "ray-head.log"
        cmd = [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            "--port",
            str(self.port),
            "--num-cpus",
            str(num_cpus),
            "--include-dashboard=false",
            "--disable-usage-stats",
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **RAY_LOOPBACK_ENV}, start_new_session=True
            )
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in self.log.read_text():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.5)

    def stop(self) -> None:
        stop_process_group(self.proc, grace_s=30)


class Stack:
    def __init__(self, data_dir: Path, env: dict[str, str] | None = None) -> None:
        """``env``: extra environment of the controller (e.g. RAY_ADDRESS, MLFLOW_TRACKING_URI of servers of its own)."""
        self.extra_env = env or {}
        self.port, self.mlflow_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.mlflow_uri = self.extra_env.get("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{self.mlflow_port}")
        self.data_dir = data_dir
        self.log = data_dir / "up.log"
        self.http = httpx.Client(base_url=self.url, timeout=30)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 180) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
        env |= RAY_LOOPBACK_ENV | self.extra_env  # the local head too stays on 127.0.0.1
        cmd = up_command(self.port, self.mlflow_port, self.data_dir)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            up = wait_until_up(f"{self.url}/v1/health", self.proc, timeout_s, "groupscale up")
        except StackError as e:
            raise AssertionError(f"{e}: {self.log.read_text()[-3000:]}") from None
        if up:
            return
        self.stop()  # a fixture that fails before its yield is not torn down
        raise AssertionError(f"no /v1/health within {timeout_s} s: {self.log.read_text()[-3000:]}")

    @property
    def database_url(self) -> str:
        """The controller's store (Optuna's studies live there too)."""
        return self.extra_env.get("GROUPSCALE_DATABASE_URL") or f"sqlite:///{(self.data_dir / 'groupscale.db').resolve()}"

    @property
    def mlflow_backend_uri(self) -> str | None:
        return self.extra_env.get("GROUPSCALE_MLFLOW_BACKEND_URI")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def wait(self, sweep_id: str, until: set[str], timeout_s: float = 600) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            sweep = self.http.get(f"/v1/sweeps/{sweep_id}").json()
            if sweep["status"] in until:
                return sweep
            time.sleep(1)
        raise AssertionError(f"sweep {sweep_id} still {sweep['status']} after {timeout_s} s")

    def cli(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
        """`groupscale ARGS` as a user runs it against this stack (GROUPSCALE_URL), output captured as text."""
        env = {**os.environ, "GROUPSCALE_URL": self.url}
        return subprocess.run(
            [sys.executable, "-m", "service", *args], env=env, capture_output=True, text=True, timeout=timeout_s
        )


BANDIT_SWEEP = bandit_spec()  # the quickest real sweep (tests.factories)


def postgres_env(server) -> dict[str, str]:  # tests.postgres.PostgresServer
    """A controller store and an MLflow backend, each a new database on the PostgreSQL server."""
    return {"GROUPSCALE_DATABASE_URL": server.create_database(), "GROUPSCALE_MLFLOW_BACKEND_URI": server.create_database()}


ON_POSTGRES = pytest.param("postgres", marks=pytest.mark.slow)  # `make test-all`, and CI after `make test`


SHARED: list[Stack] = []  # the session's stacks (fixture ``stack``), stopped when the e2e tests are done
E2E = Path(__file__).parent


def running_stack(request, tmp_path_factory, shared: bool = False):
    """A started Stack on ``request.param``'s store ("sqlite" or "postgres"), stopped after its fixture's scope."""
    env = postgres_env(request.getfixturevalue("postgres")) if request.param == "postgres" else {}
    s = Stack(tmp_path_factory.mktemp(f"stack-{request.param}"), env)
    s.start()
    if shared:
        SHARED.append(s)
    yield s
    s.stop()


def pytest_runtest_teardown(item, nextitem):
    """After the last e2e test (the e2e folder is collected before the others, and only its tests can ask for
    ``stack``) the session's stacks stop, so their idle servers do not share the CPUs with the tests after them."""
    if nextitem is None or not Path(nextitem.path).is_relative_to(E2E):
        while SHARED:
            SHARED.pop().stop()


@pytest.fixture(scope="session", params=["sqlite", ON_POSTGRES])
def stack(request, tmp_path_factory):
    """The real stack, once with SQLite (the default) and once with PostgreSQL as the controller's store and MLflow's
    backend: the whole e2e reliability suite runs on both (the PostgreSQL round is marked slow to keep `make test` under
    20 minutes on 2 cores). One per store for the session, shared by the modules (a start costs about 15 s): a test
    leaves no sweep running and the stack as it found it; a module that stops a part of it has a stack of its own
    (``module_stack``)."""
    yield from running_stack(request, tmp_path_factory, shared=True)


@pytest.fixture(scope="module", params=["sqlite", ON_POSTGRES])
def module_stack(request, tmp_path_factory):
    """A stack of the module's own, on either store, for a module that stops its parts (its MLflow server)."""
    yield from running_stack(request, tmp_path_factory)


def assert_fit_of(trials: list[dict], fit: dict) -> None:
    """The API's fit is the law fitted to the trials the API lists (their final gap and its standard error)."""
    done = [t for t in trials if t["status"] == "succeeded"]
    rows = [[t[k] for t in done] for k in ("group_size", "samples_per_step", "seed")]
    own = fit_law(*rows, [t["metrics"]["gap"] for t in done], y_se=[t["metrics"].get("gap_se") for t in done])
    assert fit["status"] == own.status and fit["evidence"] == own.evidence, (fit, own)
    assert fit["g_star"] == (None if own.g_star is None else pytest.approx(own.g_star))
    assert fit["recommended_group_size"] == own.recommended_group_size
