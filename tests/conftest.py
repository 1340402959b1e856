import os

import pytest

from service.store import CHECK_ENV
from tests.postgres import PostgresServer

os.environ.setdefault(CHECK_ENV, "1")  # a tracking or Ray call inside a store transaction raises, in every test and e2e stack
# A refused connection fails at once (service.client waits for a starting controller by default); the tests of that
# wait set it themselves, and the e2e stacks answer before a client is pointed at them.
os.environ.setdefault("GROUPSCALE_WAIT_S", "0")


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL server for the whole run (tests/postgres.py); create_database(name) -> URL."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory):
    """One warm-started preset cache for the whole test session (tiny-llama ~10 s, chat-tiny ~40 s, built once)."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def s3_server():
    """An S3 API server on 127.0.0.1 for the whole run (moto's server mode): what GROUPSCALE_STORAGE_URI s3://...
    reaches in the tests. Yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture
def s3_bucket(s3_server, monkeypatch):
    """A new bucket on the S3 server, as ``s3://<bucket>``; the environment points S3 clients (pyarrow's, boto3's) at
    the server with AWS's own variables, as a user's would."""
    import uuid

    import boto3

    for key, value in {**S3_ENV, "AWS_ENDPOINT_URL": s3_server}.items():
        monkeypatch.setenv(key, value)
    name = f"groupscale-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket=name)
    return f"s3://{name}"
