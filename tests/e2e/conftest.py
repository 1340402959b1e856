"""The real stack for end-to-end tests: `groupscale up` (MLflow server, local Ray, controller) on free ports."""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from service.stack import StackError, up_command, wait_until_up


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    def __init__(self, data_dir: Path) -> None:
        self.port, self.mlflow_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.mlflow_uri = f"http://127.0.0.1:{self.mlflow_port}"
        self.data_dir = data_dir
        self.log = data_dir / "up.log"
        self.http = httpx.Client(base_url=self.url, timeout=30)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 180) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
        cmd = up_command(self.port, self.mlflow_port, self.data_dir)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            up = wait_until_up(f"{self.url}/v1/health", self.proc, timeout_s, "groupscale up")
        except StackError as e:
            raise AssertionError(f"{e}: {self.log.read_text()[-3000:]}") from None
        if up:
            return
        raise AssertionError(f"no /v1/health within {timeout_s} s: {self.log.read_text()[-3000:]}")

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


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("stack"))
    s.start()
    yield s
    s.stop()
