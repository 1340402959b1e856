"""What `groupscale up` starts dies with it, and it never serves on a port another process holds.

Lifetime. `up` puts a marker in its environment (GROUPSCALE_UP_ID, inherited by every process it
starts: the MLflow server and its workers, the local Ray head, its raylet, agents and workers) and
starts a watchdog (``python -m service.lifetime``), a child that polls `up`'s pid. When `up` is gone,
however it ended (SIGKILL and the OOM killer included, which run no handler of its own), the watchdog
terminates every process that carries the marker, kills what is left after GRACE_S, and exits.

Ports. Before it starts a server, `up` checks the port (``claim_port``): free, it goes on; held by
the MLflow server of its own data dir whose `up` is gone (an orphan of an `up` that could not clean up),
it stops that server and goes on; held by anything else, it refuses (StackConfigError, exit 2) naming
the port, the process when it can tell, and the option that picks another port.

Signals. The `up` command first of all makes Ctrl-C and SIGTERM raise KeyboardInterrupt (a background job of a script
included, which starts with SIGINT ignored), and `up` holds them back while a server starts, until the process it
started is where its cleanup finds it (``interrupts_held``), and looks again between the steps of its start for one whose
KeyboardInterrupt Python swallowed (``raise_if_interrupted``): a Ctrl-C at any moment stops what had started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil


class StackError(RuntimeError):
    """A component could not be started (the message says which and where its log is)."""


class StackConfigError(StackError):
    """The configuration cannot work (CLI exit 2): the message names the setting and what to change."""


MARKER = "GROUPSCALE_UP_ID"
POLL_S = 0.5  # how often the watchdog looks for its parent
GRACE_S = 5.0  # SIGTERM, then SIGKILL after this long
MLFLOW_RECORD = "mlflow-server.json"  # under data_dir/logs: which process serves this data dir's MLflow


def mark_environment() -> str:
    """Give this process (and so every child it starts from now on) a fresh marker; returns it."""
    marker = uuid.uuid4().hex
    os.environ[MARKER] = marker
    return marker


class _Held:
    """What `up` is starting while its handler holds Ctrl-C back (None: nothing), whether one came meanwhile, and
    whether one came at all (``came``: its KeyboardInterrupt may have been swallowed where it was raised)."""

    starting: str | None = None
    pending = False
    came = False


def _interrupt(signum: int, frame: object) -> None:
    _Held.came = True
    if _Held.starting is None:
        raise KeyboardInterrupt
    if not _Held.pending:  # os.write: a print here could land inside a print of the code it interrupted
        _Held.pending = True
        with contextlib.suppress(OSError, ValueError):
            os.write(sys.stdout.fileno(), f"groupscale: stopping as soon as {_Held.starting} has started\n".encode())


def interrupt_on_ctrl_c_and_sigterm() -> dict[int, Any]:
    """Make SIGINT and SIGTERM raise KeyboardInterrupt in this process, so that a ``finally`` stops what it started
    (except inside ``interrupts_held``). Returns the handlers it replaced (signal number -> handler).

    Set explicitly: a process started in the background of a shell inherits SIGINT ignored (POSIX: a non-interactive
    shell starts its ``&`` jobs so), where Ctrl-C or ``kill -INT`` did nothing; `up` honours it all the same. SIGTERM's
    default ends a process without running any ``finally``."""
    _Held.came = False
    return {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}


def interrupted(handler: Any = None) -> bool:
    """Whether a Ctrl-C or SIGTERM came since interrupt_on_ctrl_c_and_sigterm set its handler, that handler being the
    SIGINT handler in place (or ``handler``, the one that was before another replaced it): False in any other process.

    Its KeyboardInterrupt may be lost: the handler raises where the signal lands, and Python swallows an exception raised
    in a finalizer or a weakref callback. One that landed in SQLAlchemy's (``_collection_gced``, run by the garbage
    collector while `up` polled the MLflow server) printed "Exception ignored in: ..." and `up` went on to serve (2 of 12
    runs of an e2e test)."""
    return _Held.came and (signal.getsignal(signal.SIGINT) if handler is None else handler) is _interrupt


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt if ``interrupted()``: `up` calls it between the steps of its start, and while it waits for
    a server to answer, so that a Ctrl-C whose KeyboardInterrupt was swallowed still stops it."""
    if interrupted():
        raise KeyboardInterrupt


@contextlib.contextmanager
def interrupts_held(what: str) -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back while ``what`` starts, until the block has put the process it started where the
    cleanup finds it; one that came meanwhile is said at once and raised (KeyboardInterrupt) on leaving the block, and one
    that came before and was swallowed is raised on entering it (raise_if_interrupted).
    Without it, a Ctrl-C inside ``subprocess.Popen`` (after the fork) lost the server it had started.

    The handler holds it, not ``signal.pthread_sigmask``: a mask is per thread, and `up`'s imports start native threads
    (numpy's, pyarrow's jemalloc) that then take the signal, and Python runs the handler in the main thread regardless. Only
    interrupt_on_ctrl_c_and_sigterm's handler holds: one that ray.init puts in place (SIGTERM) does not.
    """
    raise_if_interrupted()
    _Held.starting, _Held.pending = what, False
    try:
        yield
    finally:
        _Held.starting = None
    if _Held.pending:
        _Held.pending = False
        raise KeyboardInterrupt


def start_watchdog(marker: str) -> subprocess.Popen:
    """The watchdog of this process: ends every process with ``marker`` once this one is gone."""
    cmd = [sys.executable, "-m", "service.lifetime", str(os.getpid()), marker]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)


def marked(marker: str) -> list[psutil.Process]:
    """Processes whose environment holds MARKER=marker (this one excluded)."""
    out = []
    for p in psutil.process_iter():
        if p.pid == os.getpid():
            continue
        try:
            if p.environ().get(MARKER) == marker:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def end_processes(processes: list[psutil.Process], grace_s: float = GRACE_S) -> None:
    """SIGTERM each, then SIGKILL those still alive after grace_s."""
    for p in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
    _, alive = psutil.wait_procs(processes, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def _alive(p: psutil.Process) -> bool:
    """Running and not a zombie (a killed `up` stays a zombie until its own parent reaps it)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def watch(parent_pid: int, marker: str) -> None:
    """Wait until ``parent_pid`` has exited, then end every process with ``marker`` (twice: a process
    may start another while the first round ends it)."""
    try:
        parent = psutil.Process(parent_pid)
        while _alive(parent):
            time.sleep(POLL_S)
    except psutil.NoSuchProcess:
        pass
    for _ in range(2):
        end_processes(marked(marker))


def record_mlflow(data_dir: Path, proc: subprocess.Popen, port: int) -> None:
    """Note which process serves this data dir's MLflow (read by ``claim_port`` of a later `up`)."""
    record = {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time(), "port": port, "up_pid": os.getpid()}
    (data_dir / "logs" / MLFLOW_RECORD).write_text(json.dumps(record))


def _answers(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def _listener(port: int) -> psutil.Process | None:
    """The process listening on TCP ``port``, when the system tells (None otherwise)."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return None
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            try:
                return psutil.Process(c.pid)
            except psutil.NoSuchProcess:
                return None
    return None


def _describe(p: psutil.Process | None) -> str:
    if p is None:
        return "another process"
    try:
        return f"pid {p.pid} ({' '.join(p.cmdline())[:120]})"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return f"pid {p.pid}"


def _orphan_of(data_dir: Path, port: int, listener: psutil.Process | None) -> psutil.Process | None:
    """The MLflow server this data dir's earlier `up` started, when it still holds ``port`` and that
    `up` is gone; else None."""
    try:
        record = json.loads((data_dir / "logs" / MLFLOW_RECORD).read_text())
        server = psutil.Process(record["pid"])
        if record["port"] != port or abs(server.create_time() - record["create_time"]) > 1e-3:
            return None  # the pid was reused, or the record is of another port
        if record["up_pid"] != os.getpid() and psutil.pid_exists(record["up_pid"]) and _alive(psutil.Process(record["up_pid"])):
            return None  # its `up` still runs: not an orphan
        family = [server, *server.children(recursive=True)]
        if listener is not None and listener.pid not in {p.pid for p in family}:
            return None
        return server
    except (OSError, ValueError, KeyError, psutil.Error):
        return None


def claim_port(host: str, port: int, option: str, data_dir: Path | None = None, wait_s: float = 20.0) -> None:
    """Make sure ``port`` is free for the server `up` starts next.

    Args:
        option: the CLI option that chooses this port (named in the refusal).
        data_dir: for the MLflow port, the data dir whose own orphaned server may be stopped.
    Raises:
        StackConfigError: something else holds the port (exit 2).
    """
    if not _answers(host, port):
        return
    listener = _listener(port)
    orphan = _orphan_of(data_dir, port, listener) if data_dir is not None else None
    if orphan is None:
        raise StackConfigError(
            f"port {port} on {host} is in use by {_describe(listener)}; groupscale up serves only on a port it "
            f"can bind itself: stop that process or choose another port with {option}"
        )
    print(f"groupscale: stopping the MLflow server an earlier up of {data_dir} left on port {port} (pid {orphan.pid})")
    try:
        os.killpg(orphan.pid, signal.SIGTERM)  # its own process group (start_mlflow)
    except (ProcessLookupError, PermissionError):
        end_processes([orphan])
    deadline = time.monotonic() + wait_s
    while _answers(host, port) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _answers(host, port):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(orphan.pid, signal.SIGKILL)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2])
