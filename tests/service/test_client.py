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


def test_the_token_is_sent_stripped_and_an_unsendable_one_is_refused_naming_the_variable(monkeypatch):
    """A secret file's trailing newline made httpx refuse the header, and the CLI said "cannot reach the controller"."""
    from fastapi import Request

    from service.client import TokenError

    api = FastAPI()

    @api.get("/v1/sweeps")
    def sweeps(request: Request) -> list:
        return [request.headers.get("authorization")]

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("GROUPSCALE_API_TOKEN", " tok-1\r\n")
        assert Client(url, wait_s=30).sweeps() == ["Bearer tok-1"]
        for raw, why in (
            ("\n", "set but blank"),
            ("tok\n2", "holds a control or non-ASCII"),
            ("tök", "holds a control or non-ASCII"),
        ):
            monkeypatch.setenv("GROUPSCALE_API_TOKEN", raw)
            with pytest.raises(TokenError, match=why):
                Client(url)
            r = CliRunner().invoke(cli, ["status", "--url", url])
            assert r.exit_code == 2 and r.stderr.startswith(f"error: GROUPSCALE_API_TOKEN: {why}"), r.output
    finally:
        server.should_exit = True
