"""Closed when a token is set, on the real stack: the API asks every caller but health for the token,
MLflow runs its basic-auth app and the trials log to it with credentials, and no secret leaks."""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from service.stack import start_mlflow, stop_process_group
from tests.e2e.conftest import BANDIT_SWEEP, Stack
from tests.openapi import read_urls
from tests.ports import free_port

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-" + secrets.token_hex(12)
PASSWORD = "pw-" + secrets.token_hex(12)  # MLflow's admin password (12+ characters)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SPEC = {**BANDIT_SWEEP, "name": "e2e-auth", "probe": {"prompts": 16, "completions": 4}}


@pytest.fixture(scope="module")
def closed(tmp_path_factory):
    """A basic-auth MLflow server (docker/mlflow-auth.ini, its user store moved to a temp folder) and a
    stack with GROUPSCALE_API_TOKEN (with the trailing newline of a secret file) logging to it as admin; one finished
    sweep and one probe."""
    base = tmp_path_factory.mktemp("auth")
    shipped = (ROOT / "docker/mlflow-auth.ini").read_text()
    ini = base / "mlflow-auth.ini"
    ini.write_text(shipped.replace("sqlite:////mlflow/auth/basic_auth.db", f"sqlite:///{base / 'basic_auth.db'}"))
    assert ini.read_text() != shipped
    port = free_port()
    auth_env = {
        "MLFLOW_AUTH_CONFIG_PATH": str(ini),
        "MLFLOW_AUTH_ADMIN_PASSWORD": PASSWORD,
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),
    }
    mlflow = start_mlflow(base / "mlflow", "127.0.0.1", port, app_name="basic-auth", env=auth_env)
    uri = f"http://127.0.0.1:{port}"
    (base / "stack").mkdir()
    env = {"GROUPSCALE_API_TOKEN": TOKEN + "\n", "MLFLOW_TRACKING_URI": uri}  # as a secret file or an env file gives it
    stack = Stack(base / "stack", env | {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": PASSWORD})
    try:
        stack.start()
        sid = stack.http.post("/v1/sweeps", json=SPEC, headers=AUTH).json()["id"]
        stack.http.headers.update(AUTH)  # Stack.wait reads with it
        sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"}, timeout_s=300)
        probe = stack.http.post("/v1/probes", json=SPEC).json()
        probe["answer_id"] = stack.http.post("/v1/answers", json={**SPEC, "answer": {"budget": 2000}}).json()["id"]
        stack.http.headers.pop("Authorization")
        yield stack, uri, sweep, probe
    finally:
        stack.stop()
        stop_process_group(mlflow)


def test_every_read_endpoint_asks_for_the_token_and_health_leaks_nothing(closed):
    stack, uri, sweep, probe = closed
    assert sweep["status"] == "succeeded", sweep
    reads = read_urls(stack.http, sweep["id"], probe["id"], probe["answer_id"], "task=bandit&model=tabular")
    assert len(reads) == 7  # sweeps, a sweep, its trials, its fit, a probe, an answer, recommendations
    for url in reads:
        closed_answer = stack.http.get(url)
        assert closed_answer.status_code == 401 and sweep["id"] not in closed_answer.text, url
        assert stack.http.get(url, headers=AUTH).status_code == 200, url
    health = stack.http.get("/v1/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert all(health.json()[c] == {"ok": True, "detail": ""} for c in ("controller", "ray", "mlflow", "store"))
    assert health.json()["workers"] == {} and "127.0.0.1" not in health.text and "http" not in health.text
    assert stack.http.get("/v1/health", headers=AUTH).json()["mlflow"]["detail"] == uri  # the caller with the token sees it
    for write in (
        stack.http.post("/v1/sweeps", json=SPEC),
        stack.http.delete(f"/v1/sweeps/{sweep['id']}"),
        stack.http.post(f"/v1/sweeps/{sweep['id']}/extend", json={"group_sizes": [8]}),
    ):
        assert write.status_code == 401


def test_trials_log_to_a_basic_auth_mlflow_with_credentials_and_anonymous_calls_are_refused(closed, monkeypatch):
    stack, uri, sweep, _ = closed
    trials = stack.http.get(f"/v1/sweeps/{sweep['id']}/trials", headers=AUTH).json()
    assert len(trials) == 2
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)
    client = MlflowClient(uri)
    for trial in trials:
        run = client.get_run(trial["mlflow_run_id"])
        assert run.info.status == "FINISHED"
        assert [m.step for m in client.get_metric_history(run.info.run_id, "reward_mean")] == list(range(1, 21))
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "wrong-password")
    with pytest.raises(MlflowException, match="401|Unauthorized|credentials"):
        MlflowClient(uri).get_run(trials[0]["mlflow_run_id"])
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME")
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD")
    anonymous = httpx.get(f"{uri}/api/2.0/mlflow/runs/get", params={"run_id": trials[0]["mlflow_run_id"]})
    assert anonymous.status_code == 401 and "reward_mean" not in anonymous.text


def test_no_secret_reaches_an_answer_a_log_or_mlflow(closed, monkeypatch):
    stack, uri, sweep, probe = closed
    answers = [
        stack.http.get(path, headers=AUTH).text
        for path in (
            "/v1/health",
            "/v1/sweeps",
            f"/v1/sweeps/{sweep['id']}",
            f"/v1/sweeps/{sweep['id']}/trials",
            f"/v1/sweeps/{sweep['id']}/fit",
            f"/v1/probes/{probe['id']}",
        )
    ]
    logs = [p.read_text(errors="replace") for p in stack.data_dir.rglob("*.log")]
    assert any("groupscale: API" in text and "token required" in text for text in logs)  # the banner says so
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)
    client = MlflowClient(uri)
    runs = client.search_runs([sweep["mlflow"]["experiment_id"]])
    assert len(runs) >= 3  # the parent and two trials
    logged = [str(run.data.params) + str(run.data.tags) for run in runs]
    logged += [client.download_artifacts(sweep["mlflow"]["parent_run_id"], "report.html", str(stack.data_dir))]
    logged[-1] = Path(logged[-1]).read_text()
    for text in answers + logs + logged:
        assert TOKEN not in text and PASSWORD not in text


@pytest.mark.slow
def test_public_reads_open_the_reads_and_keep_the_writes_closed(tmp_path):
    stack = Stack(tmp_path, {"GROUPSCALE_API_TOKEN": TOKEN, "GROUPSCALE_PUBLIC_READS": "1"})
    stack.start()
    try:
        assert stack.http.post("/v1/sweeps", json=SPEC).status_code == 401
        created = stack.http.post("/v1/sweeps", json=SPEC, headers=AUTH)
        assert created.status_code == 201
        sid = created.json()["id"]
        assert [s["id"] for s in stack.http.get("/v1/sweeps").json()] == [sid]
        assert stack.http.get(f"/v1/sweeps/{sid}/trials").status_code == 200
        assert stack.http.get("/v1/health").json()["mlflow"]["detail"] == stack.mlflow_uri  # reads open: health too
        assert stack.http.delete(f"/v1/sweeps/{sid}").status_code == 401
        assert stack.http.delete(f"/v1/sweeps/{sid}", headers=AUTH).status_code == 200
    finally:
        stack.stop()


def _cli(stack: Stack, token: str | None, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GROUPSCALE_API_TOKEN"} | {"GROUPSCALE_WAIT_S": "0"}
    env |= {"GROUPSCALE_API_TOKEN": token} if token is not None else {}
    cmd = [sys.executable, "-m", "service", *args, "--url", stack.url]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def test_a_token_with_a_trailing_newline_works_on_both_sides_and_a_wrong_one_is_named(closed):
    """The server was started with TOKEN + newline (a secret file): it answered 401 to everyone, and a CLI given the
    same file's content said "cannot reach the controller". Both sides strip the token; a wrong or missing token is
    one line saying "token rejected (401)", exit 2."""
    stack, _, sweep, _ = closed
    assert stack.http.get("/v1/sweeps", headers=AUTH).status_code == 200  # the server strips its own token
    for given in (TOKEN, TOKEN + "\n", f"  {TOKEN}\r\n"):
        r = _cli(stack, given, "status", "--json")
        assert r.returncode == 0 and [s["id"] for s in json.loads(r.stdout)] == [sweep["id"]], r.stderr
    for given, why in ((TOKEN[:-1], "GROUPSCALE_API_TOKEN is not the token"), (None, "set GROUPSCALE_API_TOKEN")):
        r = _cli(stack, given, "status")
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
        assert r.stderr.startswith(f"error: token rejected (401) by the controller at {stack.url}: ") and why in r.stderr
        assert "cannot reach" not in r.stderr and TOKEN[:-1] not in r.stderr
