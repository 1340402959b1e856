"""What `groupscale up` starts dies with it, however it ends, and it never adopts a stranger's port."""

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest
from mlflow import MlflowClient

from service.lifetime import MARKER, marked
from service.stack import up_command
from tests.e2e.conftest import BANDIT_SWEEP, RAY_LOOPBACK_ENV, Stack
from tests.ports import free_port

pytestmark = pytest.mark.e2e
SPEC = {**BANDIT_SWEEP, "name": "e2e-lifetime"}


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _cmdline(p: psutil.Process) -> list[str]:
    """Its command line, [] once it has exited: a child of `up` (Ray's, MLflow's) may exit between ``children()`` and
    ``cmdline()`` (psutil.NoSuchProcess failed a test on a fresh clone)."""
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _marker(stack: Stack) -> str:
    """The marker of a running `up`: the last argument of its watchdog (a process's own /proc environ
    is the one it was started with, so `up`'s own does not show it; its children's do)."""
    (watchdog,) = [c for c in psutil.Process(stack.proc.pid).children() if "service.lifetime" in _cmdline(c)]
    return _cmdline(watchdog)[-1]


def _kill_up(stack: Stack, marker: str | None = None) -> str:
    """SIGKILL `up` alone (not its group); returns its marker."""
    marker = marker or _marker(stack)
    assert len(marked(marker)) >= 3  # the MLflow server and its worker, the Ray head's processes
    os.kill(stack.proc.pid, signal.SIGKILL)
    stack.proc.wait()
    return marker


def _gone_within(marker: str, ports: list[int], timeout_s: float) -> float:
    start = time.monotonic()
    while marked(marker) or any(_listening(p) for p in ports):
        assert time.monotonic() - start < timeout_s, ([_cmdline(p)[:3] for p in marked(marker)], ports)
        time.sleep(0.5)
    return time.monotonic() - start


def _second_up(data_dir, port: int, mlflow_port: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS", MARKER)}
    return subprocess.run(up_command(port, mlflow_port, data_dir), capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.slow  # 37 s: `make test` stays under 20 minutes (the watchdog's own test below stays there)
def test_sigkill_of_up_leaves_nothing_and_another_data_dir_never_adopts_its_ports(tmp_path):
    stack = Stack(tmp_path / "a")
    (tmp_path / "a").mkdir()
    stack.start()
    try:
        other = tmp_path / "b"
        taken_mlflow = _second_up(other, free_port(), stack.mlflow_port)
        assert taken_mlflow.returncode == 2, taken_mlflow.stderr
        assert f"port {stack.mlflow_port}" in taken_mlflow.stderr and "--mlflow-port" in taken_mlflow.stderr
        assert "mlflow" in taken_mlflow.stderr  # the process holding it, by its command line
        taken_api = _second_up(other, stack.port, free_port())
        assert taken_api.returncode == 2 and f"port {stack.port}" in taken_api.stderr and "--port" in taken_api.stderr
        assert not (other / "mlflow.db").exists()  # refused before anything started
        marker = _kill_up(stack)
        seconds = _gone_within(marker, [stack.port, stack.mlflow_port], timeout_s=20)
        print(f"every process of the killed up ended {seconds:.1f} s after SIGKILL")
    finally:
        stack.stop()


@pytest.mark.slow
def test_up_restarts_on_its_own_data_dir_after_a_sigkill_and_keeps_every_run(tmp_path):
    stack = Stack(tmp_path)
    stack.start()
    try:
        sid = stack.http.post("/v1/sweeps", json=SPEC).json()["id"]
        sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"}, timeout_s=300)
        assert sweep["status"] == "succeeded", sweep
        runs = {r.info.run_id for r in MlflowClient(stack.mlflow_uri).search_runs([sweep["mlflow"]["experiment_id"]])}
        assert len(runs) == 3
        # 1. up is killed; the next up starts at once, while the watchdog may still be ending the old servers
        _kill_up(stack)
        stack.start()
        assert stack.http.get(f"/v1/sweeps/{sid}").json()["status"] == "succeeded"
        # 2. up and its watchdog are both killed: the MLflow server of this data dir is an orphan; the next
        #    up stops it instead of adopting it, and still keeps every run
        marker = _marker(stack)
        watchdog = [p for p in marked(marker) if "service.lifetime" in _cmdline(p)]
        assert len(watchdog) == 1
        watchdog[0].kill()
        _kill_up(stack, marker)
        assert _listening(stack.mlflow_port)  # the orphan still serves
        stack.start()
        assert "stopping the MLflow server an earlier up" in stack.log.read_text()
        again = {r.info.run_id for r in MlflowClient(stack.mlflow_uri).search_runs([sweep["mlflow"]["experiment_id"]])}
        assert again == runs
        for p in marked(marker):  # the first up's Ray processes, which no watchdog ended
            p.kill()
    finally:
        stack.stop()


def test_the_watchdog_ends_the_marked_processes_when_its_parent_is_gone(tmp_path):
    """service.lifetime.watch on its own: a parent that exits (SIGKILL) takes a marked grandchild with it."""
    code = (
        "import os, subprocess, sys, time\n"
        "from service.lifetime import mark_environment, start_watchdog\n"
        "start_watchdog(mark_environment())\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        "print(os.environ['GROUPSCALE_UP_ID'], flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    marker = parent.stdout.readline().strip()
    deadline = time.monotonic() + 30
    while len(marked(marker)) < 2:  # the sleeper and the watchdog
        assert time.monotonic() < deadline
        time.sleep(0.1)
    parent.kill()
    parent.wait()
    assert _gone_within(marker, [], timeout_s=15) < 15


def _is_mlflow_server(cmdline: list[str]) -> bool:
    """``[python, .../mlflow, server, ...]`` (service.stack.start_mlflow) or ``[.../mlflow, server, ...]``."""
    return "server" in cmdline[1:3] and any(Path(a).name == "mlflow" for a in cmdline[:2])


def _children(pid: int) -> list[list[str]]:
    try:
        return [_cmdline(c) for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _catches_sigint(pid: int, *_: int) -> bool:
    """`up` has its own SIGINT handler (/proc's SigCgt): started with SIGINT ignored, it has none until it sets one."""
    try:
        (line,) = [x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigCgt:")]
    except OSError:
        return False
    return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))


def _runs(name: str):
    """A step of `up`'s start: a process whose program is ``name`` has started (the Ray head's first ones)."""
    return lambda pid, *_: any(c and Path(c[0]).name == name for c in _children(pid))


# The steps of `up`'s start, in order, as a test sees them: (name, has it been reached? (up's pid, port, mlflow port)).
STEPS = {
    "imports": _catches_sigint,  # the first thing `up` does, before seconds of imports
    "watchdog": lambda pid, *_: any("service.lifetime" in c for c in _children(pid)),
    "mlflow": lambda pid, *_: any(_is_mlflow_server(c) for c in _children(pid)),  # inside or just after its Popen
    "mlflow answers": lambda pid, port, mlflow_port: _listening(mlflow_port),
    "ray": _runs("gcs_server"),  # ray.init has begun and not returned
    "raylet": _runs("raylet"),
    "api": lambda pid, port, mlflow_port: _listening(port),  # it serves
}
TAG = "GROUPSCALE_TEST_UP"  # in the environment of the `up` a test starts, so of everything that `up` starts


def _tagged(tag: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG) == tag and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def _ctrl_c_while_up_starts(tmp_path: Path, ray_tmp: Path, step: str, then_s: float = 0.0) -> list[str]:
    """Start `up` as a script's background job starts it (SIGINT ignored), wait for ``step`` of its start and then
    ``then_s``, and Ctrl-C it (SIGINT to its process group, as a terminal sends it). Asserts that `up` exits 130 (0 once
    it serves: a clean stop) and that nothing it started outlives it: every process carrying the test's tag ends within
    20 s, with `up`'s watchdog stopped (SIGSTOP) as soon as it is seen, so that `up` alone did it; both ports are free;
    no Ray session folder is left in ``ray_tmp``. Returns `up`'s output lines."""
    tag = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS", MARKER)}
    env |= RAY_LOOPBACK_ENV | {"RAY_TMPDIR": str(ray_tmp), TAG: tag}
    port, mlflow_port, log = free_port(), free_port(), tmp_path / f"up-{tag[:8]}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            up_command(port, mlflow_port, tmp_path / "data"),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as a shell's background job starts it
        )
    watchdogs: list[psutil.Process] = []

    def stop_watchdog(among: list[psutil.Process] | None = None) -> None:  # found once, stopped once
        with contextlib.suppress(psutil.Error):
            if not watchdogs and (
                found := [c for c in among or psutil.Process(proc.pid).children() if "service.lifetime" in _cmdline(c)]
            ):
                for w in found:
                    w.suspend()
                watchdogs.extend(found)

    try:
        deadline = time.monotonic() + 120
        while not STEPS[step](proc.pid, port, mlflow_port):
            assert proc.poll() is None and time.monotonic() < deadline, (step, log.read_text())
            stop_watchdog()
            time.sleep(0.02)
        if step == "imports":  # a SIGINT that came before was lost (ignored): that must be before anything started
            assert _children(proc.pid) == [], "up set its SIGINT handler only after it had started processes"
        until = time.monotonic() + then_s
        while time.monotonic() < until:
            stop_watchdog()
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        deadline = time.monotonic() + 60
        while proc.poll() is None:
            assert time.monotonic() < deadline, (step, log.read_text())
            stop_watchdog()
            time.sleep(0.02)
        assert proc.returncode == (0 if step == "api" else 130), (step, proc.returncode, log.read_text())  # served: a clean stop
        stop_watchdog(_tagged(tag))  # one that `up` started in its last moments
        deadline = time.monotonic() + 20
        while left := [p for p in _tagged(tag) if "service.lifetime" not in _cmdline(p)]:
            assert time.monotonic() < deadline, (step, then_s, [_cmdline(p)[:3] for p in left], log.read_text())
            time.sleep(0.2)
        assert not _listening(port) and not _listening(mlflow_port), (step, then_s)
        sessions = sorted(p.name for p in (ray_tmp / "ray").glob("session_*"))
        assert sessions == [], (step, then_s, sessions, log.read_text())
        return log.read_text().splitlines()
    finally:
        for p in _tagged(tag):
            with contextlib.suppress(psutil.Error):
                p.kill()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("step", ["imports", "mlflow", "ray"])
def test_ctrl_c_while_up_starts_stops_what_had_started_itself_and_says_so(tmp_path, ray_tmp, step):
    """`up` says at once what it starts (MLflow and Ray take tens of seconds before the API answers). A Ctrl-C to its
    process group while it starts stops what had started (nothing left running, the watchdog kept out of it), and `up`
    exits 130. Started with SIGINT ignored, as from a shell's background job (`make test` run as one hung here for 60 s).

    imports: `up` honours Ctrl-C before it starts anything (a SIGINT in its first seconds, while it imported, was lost
    and `up` went on to serve). mlflow: a Ctrl-C inside the Popen of the MLflow server, or before its ``try``, left a
    server that nothing stopped (1 of 3 clean runs). ray: inside ray.init, which then left its session folder; now
    held until ray.init returns, and said."""
    lines = _ctrl_c_while_up_starts(tmp_path, ray_tmp, step)
    assert not any(line.startswith("groupscale: API") for line in lines), lines
    if step == "imports":
        return
    assert lines[0].startswith("groupscale: starting MLflow and a local Ray head, then the API on http://127.0.0.1:"), lines
    assert "groupscale: stopped before the API served; stopping what had started" in lines, lines
    if step == "ray":
        assert "groupscale: stopping as soon as the local Ray head has started" in lines, lines


@pytest.mark.soak  # 50 starts of `up`, each stopped at a step of its start: 10m39s on 2 cores shared (load about 3)
def test_a_ctrl_c_at_any_moment_of_ups_start_leaves_nothing_running_50_times_in_a_row(tmp_path, ray_tmp):
    """Each step of the start in turn, then a delay drawn anew each time (0-0.5 s), 50 times: every time `up` exits 130
    (0 once it serves) and nothing it started is left (processes, ports, Ray's session folder)."""
    rng = random.Random(54)
    names = list(STEPS)
    for i in range(50):
        _ctrl_c_while_up_starts(tmp_path, ray_tmp, names[i % len(names)], then_s=rng.uniform(0, 0.5))


def test_ctrl_c_stops_up_at_once_while_its_mlflow_is_down(tmp_path):
    """Startup used to reconcile before the web server honoured Ctrl-C: with MLflow down, its calls retried for
    5 minutes, and `up` ignored SIGINT and SIGTERM all that time. Now the scheduling thread reconciles, and /v1/health
    says within 1 s that MLflow is down."""
    from service.store import Store, Sweep, Trial

    data = tmp_path / "data"
    data.mkdir()
    store = Store(f"sqlite:///{data / 'groupscale.db'}")
    with store.session() as s:  # a running sweep with a trial whose run a restart looks for in MLflow
        sweep = Sweep(name="n", spec=SPEC, task_name="bandit", model_name="tabular", status="running")
        sweep.mlflow_experiment_id, sweep.mlflow_parent_run_id = "1", "0" * 32
        s.add(sweep)
        s.flush()
        s.add(Trial(sweep_id=sweep.id, position=0, group_size=2, samples_per_step=16, seed=0))
    store.engine.dispose()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", MARKER)}
    env |= RAY_LOOPBACK_ENV | {"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{free_port()}"}  # nothing listens there
    log = tmp_path / "up.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            up_command(port, free_port(), data), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 180
        while not _listening(port):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        start = time.monotonic()
        health = httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=30)
        assert time.monotonic() - start < 1.0 and health.status_code == 503
        assert health.json()["mlflow"]["ok"] is False and health.json()["store"]["ok"] is True
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C
        start = time.monotonic()
        proc.wait(timeout=120)
        assert time.monotonic() - start < 30, log.read_text()[-3000:]
        assert proc.returncode == 0, (proc.returncode, log.read_text()[-3000:])  # it served: a clean stop
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _session_dir(stack: Stack) -> Path:
    """The session folder of the Ray head `up` started: its raylet's ``--session_dir``."""
    children = [_cmdline(p) for p in psutil.Process(stack.proc.pid).children(recursive=True)]
    (raylet,) = [c for c in children if c and Path(c[0]).name == "raylet"]
    (arg,) = [a for a in raylet if a.startswith("--session_dir=")]
    return Path(arg.split("=", 1)[1])


@pytest.fixture
def ray_tmp():
    """A RAY_TMPDIR of the test's own, short: Ray's socket paths under it must fit in 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="gs-ray-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow  # 80-90 s on 2 cores (a stack started and stopped, Ray logs filled to rotate): make test under 20 min
def test_a_clean_stop_removes_its_own_ray_session_and_its_ray_logs_rotate(tmp_path, ray_tmp):
    """Each `up` used to leave its Ray session folder (logs, sockets, runtime resources) under Ray's temp dir, and its
    workers' logs were never rotated. Now Ray's log rotation is set for the head `up` starts
    (GROUPSCALE_RAY_ROTATION_MAX_BYTES / _BACKUP_COUNT, given to Ray as RAY_ROTATION_*), and a clean stop deletes
    that head's session folder and no other (a stranger's session in the same temp dir stays)."""
    stranger = ray_tmp / "ray" / "session_2000-01-01_00-00-00_000000_1"
    (stranger / "logs").mkdir(parents=True)
    (stranger / "logs" / "raylet.out").write_text("another head's log\n")
    env = {"RAY_TMPDIR": str(ray_tmp), "GROUPSCALE_RAY_ROTATION_MAX_BYTES": "4096", "GROUPSCALE_RAY_ROTATION_BACKUP_COUNT": "2"}
    stack = Stack(tmp_path, env)
    stack.start()
    try:
        session = _session_dir(stack)
        assert session.parent == ray_tmp / "ray" and session.is_dir()
        deadline = time.monotonic() + 120
        while not (workers := [p for p in marked(_marker(stack)) if "TrialWorker" in " ".join(_cmdline(p))]):
            assert time.monotonic() < deadline, "no warm worker started"
            time.sleep(0.5)
        for p in [*workers, *(p for p in marked(_marker(stack)) if Path((_cmdline(p) or [""])[0]).name == "raylet")]:
            rotation = {k: v for k, v in p.environ().items() if k.startswith("RAY_ROTATION_")}
            assert rotation == {"RAY_ROTATION_MAX_BYTES": "4096", "RAY_ROTATION_BACKUP_COUNT": "2"}, p.cmdline()[:2]
        logs = session / "logs"
        deadline = time.monotonic() + 60
        rotated = ["raylet.out.2", "python-core-worker-*.log.1"]  # the head's log and its workers' own pass 4 KB soon
        while not all(list(logs.glob(name)) for name in rotated):
            assert time.monotonic() < deadline, sorted(f.name for f in logs.iterdir())
            time.sleep(0.5)
        assert not list(logs.glob("*.3")), sorted(f.name for f in logs.iterdir())  # 2 backups kept
    finally:
        stack.stop()
    assert stack.proc.returncode is not None and not session.exists()
    assert (stranger / "logs" / "raylet.out").read_text() == "another head's log\n"
    assert sorted(p.name for p in (ray_tmp / "ray").iterdir() if p.name.startswith("session_")) == [stranger.name]
    time.sleep(2)  # nothing of the stopped head writes it again
    assert not session.exists()
