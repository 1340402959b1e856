import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from service.settings import Settings
from tests.factories import spec


@pytest.fixture(params=["sqlite", "postgres"])
def make_client(request, tmp_path):
    """An app with a real store (SQLite, or a fresh database on PostgreSQL) and no scheduler (HTTP layer only)."""
    if request.param == "postgres":
        settings_db = {"database_url": request.getfixturevalue("postgres").create_database()}
    else:
        settings_db = {}

    def make(**settings):
        app = create_app(Settings(data_dir=tmp_path, **settings_db, **settings), run_scheduler=False)
        return TestClient(app)

    return make


@pytest.fixture
def client(make_client):
    with make_client() as c:
        yield c


SPEC = spec(name="s", group_sizes=[2, 4, 8, 16], samples_per_step=[64], seeds=[0, 1])
