"""The MLflow retry layer against a real tracking server that goes down and comes back."""

import json
import threading
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, RESOURCE_DOES_NOT_EXIST

from service.stack import start_mlflow, stop_process_group
from tests.ports import free_port
from workers.tracking import RetryingClient, RunLogger, mlflow_call


def test_a_bad_request_is_not_retried():
    calls = []

    def bad():
        calls.append(1)
        raise MlflowException("no such run", error_code=RESOURCE_DOES_NOT_EXIST)

    with pytest.raises(MlflowException):
        mlflow_call(bad, retry_s=30)
    assert len(calls) == 1


def test_a_transient_failure_is_retried_then_given_up_within_the_bound():
    calls = []

    def down():
        calls.append(time.monotonic())
        raise MlflowException("connection refused", error_code=INTERNAL_ERROR)

    start = time.monotonic()
    with pytest.raises(MlflowException):
        mlflow_call(down, retry_s=2.0)
    assert len(calls) >= 2  # retried
    assert time.monotonic() - start < 2.0 + 15 + 1  # stopped at the bound (plus at most one backoff sleep)


@pytest.mark.e2e
@pytest.mark.slow  # 28 s of a server restart: `make test` stays under 20 minutes (its retried writes stay there)
def test_no_metric_point_is_lost_across_a_tracking_server_restart(tmp_path):
    port = free_port()
    server = start_mlflow(tmp_path, "127.0.0.1", port)
    uri = f"http://127.0.0.1:{port}"
    try:
        client = MlflowClient(uri)
        run_id = client.create_run(client.create_experiment("retry")).info.run_id
        logger = RunLogger(uri, run_id, flush_every=10)
        for step in range(1, 21):
            logger({"reward_mean": step / 100}, step)
        stop_process_group(server)  # down: the next flush must wait for the new server, not drop points
        restarted: list = []
        t = threading.Timer(5.0, lambda: restarted.append(start_mlflow(tmp_path, "127.0.0.1", port)))
        t.start()
        for step in range(21, 41):
            logger({"reward_mean": step / 100}, step)
        logger.flush(final=True)
        t.join()
        steps = sorted(m.step for m in MlflowClient(uri).get_metric_history(run_id, "reward_mean"))
        assert steps == list(range(1, 41))
    finally:
        stop_process_group(server)
        for p in restarted:
            stop_process_group(p)


@pytest.fixture
def mlflow_uri(tmp_path):
    """A real MLflow tracking server of the test's own (its URI), stopped after the test."""
    port = free_port()
    server = start_mlflow(tmp_path / "mlflow", "127.0.0.1", port)
    yield f"http://127.0.0.1:{port}"
    stop_process_group(server)


def _answer_lost_once(send, verb: str, ending: str, lost: list[str]):
    """MLflow's ``http_request`` whose first ``verb`` request to an endpoint ending in ``ending`` reaches the server
    and then loses its answer (a connection reset), as a proxy or a flaky network does; ``lost`` records it."""

    def request(host_creds, endpoint, method, *args, **kwargs):
        response = send(host_creds, endpoint, method, *args, **kwargs)
        if method == verb and endpoint.endswith(ending) and not lost:
            lost.append(endpoint)
            raise ConnectionResetError("connection reset by peer (after the server took the request)")
        return response

    return request


@pytest.mark.e2e
def test_a_retried_samples_table_is_written_once(mlflow_uri, tmp_path, monkeypatch):
    """The upload reaches the server but its answer is lost (a connection reset after the PUT): the retry must not
    append the table to itself (MlflowClient.log_table appends to an existing artifact: 5 rows became 10)."""
    import mlflow.store.artifact.http_artifact_repo as http_repo

    lost: list[str] = []
    monkeypatch.setattr(http_repo, "http_request", _answer_lost_once(http_repo.http_request, "PUT", "samples.json", lost))
    client = MlflowClient(mlflow_uri)
    run_id = client.create_run(client.create_experiment("table")).info.run_id
    rows = [{"prompt": f"{i}+1=", "completion": str(i + 1), "reward": 1.0} for i in range(5)]
    RunLogger(mlflow_uri, run_id).log_table(rows)
    assert lost  # the failure happened, and was retried
    table = json.loads((Path(client.download_artifacts(run_id, "samples.json", str(tmp_path)))).read_text())
    assert table["columns"] == ["prompt", "completion", "reward"]
    assert table["data"] == [[r["prompt"], r["completion"], r["reward"]] for r in rows]
    tag = json.loads(client.get_run(run_id).data.tags["mlflow.loggedArtifacts"])
    assert tag == [{"path": "samples.json", "type": "table"}]  # what MLflow's UI reads to show it as a table


@pytest.mark.e2e
def test_a_retried_run_creation_makes_one_run(mlflow_uri, monkeypatch):
    """runs/create reaches the server, its answer is lost: the retry takes the run that was made."""
    import mlflow.utils.rest_utils as rest

    lost: list[str] = []
    monkeypatch.setattr(rest, "http_request", _answer_lost_once(rest.http_request, "POST", "/runs/create", lost))
    client = RetryingClient(mlflow_uri)
    experiment_id = client.create_experiment("create")
    run = client.create_run(experiment_id, run_name="trial", tags={"groupscale.kind": "trial"})
    assert lost  # the failure happened, and was retried
    runs = MlflowClient(mlflow_uri).search_runs([experiment_id])
    assert [r.info.run_id for r in runs] == [run.info.run_id]
    assert runs[0].data.tags["groupscale.kind"] == "trial" and runs[0].info.run_name == "trial"


def test_a_periodic_flush_tries_once_and_keeps_the_points_the_final_one_retries(monkeypatch):
    """MLflow away (`up` restarting): a trial's periodic send must not hold training up (before: it retried for a minute
    before the next step); its points wait for the next send, and the final send retries until the server is back."""
    logger = RunLogger("http://127.0.0.1:9", "run", flush_every=1000)  # nothing listens on port 9
    calls: list[int] = []

    def log_batch(run_id, metrics=()):
        calls.append(len(metrics))
        if len(calls) < 4:
            raise MlflowException("connection refused", error_code=INTERNAL_ERROR)

    monkeypatch.setattr(logger.client, "log_batch", log_batch)
    for step in range(1, 6):
        logger({"reward_mean": step / 10}, step)
    logger.flush()
    assert calls == [5] and len(logger._buffer) == 5  # one try, nothing lost
    logger.flush()
    assert calls == [5, 5]
    logger.flush(final=True)  # retried: the third try of this call succeeds
    assert calls == [5, 5, 5, 5] and logger._buffer == []
