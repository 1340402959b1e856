"""service.client over real HTTP: a client command waits for a controller that is still starting."""

import threading
import time

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from typer.testing import CliRunner

from service.cli import app as cli
from service.client import Client
from tests.ports import free_port


def _sweeps_app() -> FastAPI:
    api = FastAPI()

    @api.get("/v1/sweeps")
    def sweeps() -> list:
        return []

    return api


def _serve_later(port: int, delay_s: float) -> uvicorn.Server:
    """A real HTTP server on ``port`` that starts listening ``delay_s`` seconds from now (in a thread)."""
    server = uvicorn.Server(uvicorn.Config(_sweeps_app(), host="127.0.0.1", port=port, log_level="warning"))

    def run() -> None:
        time.sleep(delay_s)
        server.run()

    threading.Thread(target=run, daemon=True).start()
    return server


@pytest.fixture
def late_server():
    servers = []

    def start(delay_s: float) -> str:
        port = free_port()
        servers.append(_serve_later(port, delay_s))
        return f"http://127.0.0.1:{port}"

    yield start
    for s in servers:
        s.should_exit = True


def test_a_client_waits_for_a_controller_that_starts_within_its_wait(late_server, capsys):
    url = late_server(2.0)
    t0 = time.monotonic()
    assert Client(url, wait_s=30).sweeps() == []
    waited = time.monotonic() - t0
    assert 2.0 <= waited < 20, waited
    assert f"waiting up to 30 s for the controller at {url} to start" in capsys.readouterr().err


def test_a_client_gives_up_after_its_wait_and_at_once_without_one():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(httpx.ConnectError):
        Client(url, wait_s=1.5).sweeps()
    assert 1.5 <= time.monotonic() - t0 < 5
    t0 = time.monotonic()
    with pytest.raises(httpx.ConnectError):
        Client(url, wait_s=0).sweeps()
    assert time.monotonic() - t0 < 1


def test_a_controller_that_answered_once_and_then_refuses_is_an_outage_not_waited_for(late_server):
    url = late_server(0.0)
    client = Client(url, wait_s=30)
    assert client.sweeps() == []
    client._http = httpx.Client(base_url=f"http://127.0.0.1:{free_port()}")  # the controller went away
    t0 = time.monotonic()
    with pytest.raises(httpx.ConnectError):
        client.sweeps()
    assert time.monotonic() - t0 < 1


def test_the_cli_waits_for_the_controller_per_groupscale_wait_s(late_server):
    """README's path: `groupscale up &` then a client command at once; GROUPSCALE_WAIT_S sets the wait."""
    url = late_server(2.0)
    r = CliRunner().invoke(cli, ["status", "--url", url], env={"GROUPSCALE_WAIT_S": "30"})
    assert r.exit_code == 0, r.output
    assert "waiting up to 30 s for the controller" in r.output
