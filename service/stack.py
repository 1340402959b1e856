"""`groupscale up`: the MLflow tracking server, the local Ray head and the controller, in the foreground.

Everything stops on Ctrl-C or SIGTERM: uvicorn shuts the app down (scheduler, then Ray), then the
MLflow server's process group is terminated. However `up` ends, its watchdog ends what it started,
and it refuses ports that other processes hold (service.lifetime).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import httpx
import uvicorn
from sqlalchemy.engine import make_url

from service.lifetime import (
    StackConfigError,
    StackError,
    claim_port,
    interrupted,
    interrupts_held,
    mark_environment,
    raise_if_interrupted,
    record_mlflow,
    start_watchdog,
)
from service.main import create_app
from service.mlflow_app import NAME as MLFLOW_APP
from service.scheduler.ray_backend import connect_ray, disconnect_ray, remove_session
from service.settings import Settings
from service.tracking import redact
from sweeps import storage


def same_database(a: str, b: str) -> bool:
    """Whether two SQLAlchemy URLs name one database (SQLite: one file, after resolving links and ``..``)."""
    ua, ub = make_url(a), make_url(b)
    if ua.get_backend_name() != ub.get_backend_name():
        return False
    if ua.get_backend_name() == "sqlite":
        return bool(ua.database and ub.database) and Path(ua.database).resolve() == Path(ub.database).resolve()
    default_port = {"postgresql": 5432, "mysql": 3306}.get(ua.get_backend_name())
    where = lambda u: (u.host or "localhost", u.port or default_port, u.database)  # noqa: E731 - the key of both
    return where(ua) == where(ub)


def check_storage(settings: Settings) -> None:
    """Write, read and delete one object where trials keep their checkpoints (GROUPSCALE_STORAGE_URI), before anything
    starts: a missing bucket or wrong credentials are said now, not by the first trial's checkpoint.

    Raises:
        StackConfigError: naming GROUPSCALE_STORAGE_URI and the file system's own error.
    """
    probe = storage.join(settings.storage, f".groupscale-check-{os.getpid()}")
    try:
        storage.write_text(probe, "ok")
        back = storage.read_text(probe)
        storage.delete(probe)
    except Exception as e:  # noqa: BLE001 - any file system error (pyarrow's OSError, ArrowInvalid) is the answer
        raise StackConfigError(
            f"GROUPSCALE_STORAGE_URI: {settings.storage!r}: checkpoints cannot be written there ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:300]}); check that the bucket or folder exists and the credentials "
            "(AWS_ACCESS_KEY_ID, ...) may write to it"
        ) from None
    if back != "ok":
        raise StackConfigError(f"GROUPSCALE_STORAGE_URI: {settings.storage!r}: an object written there read back as {back!r}")


def check_databases(settings: Settings, mlflow_backend: str | None) -> None:
    """Refuse a stack whose databases cannot work together, before anything starts.

    Raises:
        StackConfigError: the controller store and MLflow's backend store are one database (MLflow's own
            tables and its ``alembic_version`` would mix with the store's and Optuna's); or Optuna's
            tables in the store have a schema this Optuna cannot use (adaptive sweeps and tune_lr would
            fail at their first study).
    """
    store = settings.resolved_database_url
    if mlflow_backend and same_database(store, mlflow_backend):
        raise StackConfigError(
            f"the controller store and MLflow's backend store are the same database ({redact(store)}): "
            "give MLflow one of its own with GROUPSCALE_MLFLOW_BACKEND_URI, or the store with GROUPSCALE_DATABASE_URL"
        )
    import optuna

    try:
        optuna.storages.RDBStorage(store)  # creates Optuna's tables when missing; checks their schema version
    except RuntimeError as e:
        raise StackConfigError(
            f"Optuna's tables in {redact(store)} do not fit this Optuna {optuna.__version__}: {str(e).splitlines()[0]} "
            f"(upgrade them with `optuna storage upgrade --storage URL`)"
        ) from None


def registered_mlflow_app() -> str | None:
    """``groupscale`` (service.mlflow_app) when this install registers it as an MLflow app, else None: an install
    older than its entry point (`make setup` or `pip install -e .` registers it)."""
    from importlib.metadata import entry_points

    return MLFLOW_APP if any(e.name == MLFLOW_APP for e in entry_points(group="mlflow.app")) else None


def start_mlflow(
    data_dir: Path,
    host: str,
    port: int,
    timeout_s: float = 120.0,
    backend_store_uri: str | None = None,
    app_name: str | None = MLFLOW_APP,
    env: dict[str, str] | None = None,
    started: Callable[[subprocess.Popen], object] | None = None,
) -> subprocess.Popen:
    """Start ``mlflow server`` and wait for /health: proxied artifacts under data_dir, the backend store at
    backend_store_uri (a SQLAlchemy URL, e.g. postgresql+psycopg://...), by default SQLite under data_dir.
    ``app_name``: MLflow's ``--app-name``: by default groupscale's (service.mlflow_app: the UI opens experiments on
    their runs table; MLflow's own when this install does not register it, said on stdout), ``basic-auth`` (MLflow's
    basic authentication, configured by ``env``'s MLFLOW_AUTH_* and MLFLOW_FLASK_SERVER_SECRET_KEY, as
    docker/compose.yaml runs it) or None (MLflow's own). ``started``: called with the server's process as soon as it
    exists, with Ctrl-C held back (service.lifetime.interrupts_held): where the caller's cleanup finds it.

    Raises:
        StackError: the server exited or did not answer within timeout_s.
    """
    if app_name == MLFLOW_APP and registered_mlflow_app() is None:
        print(
            "groupscale: this install does not register its MLflow app (run `make setup` or `pip install -e .`): "
            "MLflow's UI opens experiments in its GenAI view; the links groupscale prints open the runs",
            flush=True,
        )
        app_name = None
    data_dir = data_dir.resolve()
    (data_dir / "logs").mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "logs" / "mlflow.log"
    mlflow, store = str(Path(sys.executable).with_name("mlflow")), backend_store_uri or f"sqlite:///{data_dir / 'mlflow.db'}"
    cmd = [mlflow, "server", "--backend-store-uri", store, "--artifacts-destination", str(data_dir / "mlartifacts")]
    cmd += ["--host", host, "--port", str(port), "--workers", "1", *(["--app-name", app_name] if app_name else [])]
    # The job runner (huey consumers) serves MLflow's GenAI jobs, which groupscale does not use.
    full_env = {**os.environ, **(env or {}), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    url, proc = f"http://{host}:{port}/health", None
    try:
        with interrupts_held("the MLflow server"), open(log_path, "ab") as log:  # its own session: Ctrl-C misses it
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
            if started is not None:
                started(proc)
        if wait_until_up(url, proc, timeout_s, f"the MLflow server (see {log_path})"):
            return proc
        raise StackError(f"the MLflow server did not answer on {url} within {timeout_s:.0f} s; see {log_path}")
    except BaseException:  # it exited, it did not answer, or Ctrl-C while it starts: no server outlives this call
        if proc is not None:
            stop_process_group(proc)
        raise


def wait_until_up(url: str, proc: subprocess.Popen, timeout_s: float, what: str) -> bool:
    """Poll url until it answers 200 (True) or timeout_s passes (False).

    Raises:
        StackError: proc, the process that should serve url, exited first (the message names ``what``).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        raise_if_interrupted()  # a Ctrl-C that a finalizer run by the garbage collector swallowed during the last poll
        if proc.poll() is not None:
            raise StackError(f"{what} exited with code {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return True
        time.sleep(0.5)
    return False


def stop_process_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after grace_s."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def up_command(port: int, mlflow_port: int, data_dir: Path) -> list[str]:
    """The `groupscale up` command line for this Python (used by `demo` and the end-to-end tests)."""
    options = ["--port", str(port), "--mlflow-port", str(mlflow_port), "--data-dir", str(data_dir)]
    return [sys.executable, "-m", "service", "up", *options]


def starting_line(host: str, port: int, own_mlflow: bool, ray_address: str | None) -> str:
    """The line `up` prints at once: MLflow and Ray take tens of seconds to start before the API answers."""
    ray = f"Ray at {ray_address}" if ray_address else "a local Ray head"
    return f"groupscale: starting {'MLflow and ' if own_mlflow else ''}{ray}, then the API on http://{host}:{port} ..."


def banner(settings: Settings, host: str, port: int, own_mlflow: bool) -> str:
    """The line `up` prints once it serves: where the API and MLflow are, and who may use them."""
    if not settings.api_token:
        access = "no token: open to whoever reaches the port"
    else:
        access = "token required" + ("; reads public (GROUPSCALE_PUBLIC_READS)" if settings.public_reads else "")
    mlflow = redact(settings.mlflow_tracking_uri or "")
    if own_mlflow:
        mlflow += " (on 127.0.0.1 only, without a login; docker/ runs MLflow with one)"
    return (
        f"groupscale: API http://{host}:{port} (docs /docs; {access}), MLflow {mlflow}, data {settings.data_dir}\n"
        "groupscale: up runs in the foreground until Ctrl-C; use another terminal for submit, status, answer, ..."
    )


def stop_ray(session: Path | None, failed: bool) -> None:
    """Stop the local Ray head `up` started (or leave the cluster at RAY_ADDRESS), then delete that head's session
    folder (``session``: its logs, sockets and runtime resources) unless an error ``failed`` `up`: then its logs stay
    for the reason, and their folder is printed."""
    disconnect_ray()
    if session is None:
        return
    if failed:
        print(f"groupscale: Ray's logs of this run stay in {session / 'logs'}", flush=True)
    else:
        remove_session(session)


SHUTDOWN_GRACE_S = 30  # open HTTP connections get this long once `up` is told to stop
RAY_KILL_NOTICE = "killed by `ray.kill`"  # Ray's words for a worker the scheduler stopped (DropLines)


class DropLines:
    """A text stream (`up`'s sys.stdout) less the lines that contain ``needle``. Ray's driver prints, from the error
    listener thread that ray.init starts whatever log_to_driver says, "(raylet) Task TrialWorker.run failed. There are
    infinite retries remaining, so the task will be retried. Error: The actor is dead because it was killed by
    `ray.kill`." each time the scheduler stops a busy worker (a cancel): it is not retried, and nothing failed. Ray's
    other lines pass (a worker that crashed and is retried, out-of-memory kills)."""

    def __init__(self, stream: TextIO, needle: str) -> None:
        self.stream, self.needle = stream, needle
        self._partial: dict[int, str] = {}  # per thread: what it wrote since its last newline (print writes twice)

    def write(self, text: str) -> int:
        *lines, rest = (self._partial.pop(threading.get_ident(), "") + text).split("\n")
        if rest:
            self._partial[threading.get_ident()] = rest
        if kept := "".join(f"{line}\n" for line in lines if self.needle not in line):
            self.stream.write(kept)
        return len(text)

    def flush(self) -> None:
        if (rest := self._partial.pop(threading.get_ident(), "")) and self.needle not in rest:
            self.stream.write(rest)
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, ...: the stream's
        return getattr(self.stream, name)


class ApiServer(uvicorn.Server):
    """uvicorn's server, which also stops at once for a Ctrl-C that came before its own signal handlers were in place and
    whose KeyboardInterrupt was swallowed (service.lifetime.raise_if_interrupted): it starts, then shuts down."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        ups_handler = signal.getsignal(signal.SIGINT)
        with super().capture_signals():  # uvicorn's handlers in place: from here on one sets should_exit
            if interrupted(ups_handler):
                self.handle_exit(signal.SIGINT, None)
            yield


def run_stack(host: str, port: int, mlflow_port: int, data_dir: Path) -> None:
    """Run MLflow (unless MLFLOW_TRACKING_URI points to one), Ray and the controller until stopped.

    The caller has made Ctrl-C and SIGTERM raise KeyboardInterrupt (service.lifetime.interrupt_on_ctrl_c_and_sigterm,
    the first thing the `up` command does). Each server starts with them held back (interrupts_held) until what started
    is where the ``finally`` below finds it: a Ctrl-C at any moment of the start stops all that had started.

    Raises:
        StackConfigError: a port is held by another process, or the stores cannot work (exit 2).
        StackError: a component did not start.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    env_uri = os.environ.get("MLFLOW_TRACKING_URI")
    configured = Settings(data_dir=data_dir.resolve())  # the environment's settings (tracking URI set once it is known)
    backend = configured.mlflow_backend_uri  # GROUPSCALE_MLFLOW_BACKEND_URI; default SQLite under data_dir
    mlflow_backend = backend or f"sqlite:///{data_dir / 'mlflow.db'}"
    check_databases(configured, None if env_uri else mlflow_backend)  # before anything starts
    check_storage(configured)
    claim_port(host, port, "--port")
    if not env_uri:
        claim_port("127.0.0.1", mlflow_port, "--mlflow-port", data_dir.resolve())
    start_watchdog(mark_environment())  # from here on every process started carries the marker
    # MLflow's client prints "View run ... at: URL" on stdout whenever a run ends: in `up`'s terminal, often the one
    # the user types client commands in, those lines cut into progress bars. The run links are in the API's answers.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    sys.stdout = DropLines(sys.stdout, RAY_KILL_NOTICE)
    print(starting_line(host, port, own_mlflow=not env_uri, ray_address=configured.ray_address), flush=True)
    servers: list[subprocess.Popen] = []  # what `up` started itself: start_mlflow puts its server here at once
    ray_session, serving, failed = None, False, False
    try:
        if not env_uri:
            server = start_mlflow(data_dir, "127.0.0.1", mlflow_port, backend_store_uri=mlflow_backend, started=servers.append)
            record_mlflow(data_dir.resolve(), server, mlflow_port)
        settings = configured.model_copy(update={"mlflow_tracking_uri": env_uri or f"http://127.0.0.1:{mlflow_port}"})
        with contextlib.nullcontext() if settings.ray_address else interrupts_held("the local Ray head"):
            ray_session = connect_ray(settings)  # before uvicorn, whose SIGINT/SIGTERM handlers must be the last installed
        raise_if_interrupted()
        print(banner(settings, host, port, own_mlflow=not env_uri), flush=True)
        app = create_app(settings)
        serving = True
        with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: the Ctrl-C uvicorn raises again once it has stopped
            ApiServer(
                uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
            ).run()
    except Exception:
        failed = not interrupted()  # an error after a Ctrl-C is its KeyboardInterrupt, wrapped (service.cli.commands.up)
        raise
    finally:  # a Ctrl-C or an error while starting ends here too: what started is stopped by up, not left to the watchdog
        stop_stack(serving, ray_session, failed, servers)


def stop_stack(serving: bool, ray_session: Path | None, failed: bool, servers: list[subprocess.Popen]) -> None:
    """Stop what run_stack started: Ray (its session folder deleted unless ``failed``), then the servers."""
    stopping = time.monotonic()
    if serving:  # uvicorn returned: the API and the scheduler are down
        print(
            "groupscale: the API and the scheduler stopped (running trials resume from their checkpoints on the "
            "next up); stopping Ray, then MLflow",
            flush=True,
        )
    else:
        print("groupscale: stopped before the API served; stopping what had started", flush=True)
    stop_ray(ray_session, failed)
    for proc in servers:
        stop_process_group(proc)
    print(f"groupscale: stopped in {time.monotonic() - stopping:.1f} s", flush=True)
