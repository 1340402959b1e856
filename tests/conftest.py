import pytest

from tests.postgres import PostgresServer


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL server for the whole run (tests/postgres.py); create_database(name) -> URL."""
    with PostgresServer() as server:
        yield server
