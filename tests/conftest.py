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
