"""The MLflow retry layer against a real tracking server that goes down and comes back."""

import threading
import time

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, RESOURCE_DOES_NOT_EXIST

from service.stack import start_mlflow, stop_process_group
from tests.ports import free_port
from workers.tracking import RunLogger, mlflow_call


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
