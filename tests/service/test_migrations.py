"""The store's schema comes from Alembic migrations (service/migrations) with a version table of its own:
they build exactly the models' tables, adopt a database made before migrations, and leave Optuna's alone."""

import optuna
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from service.store import VERSION_TABLE, Base, Store, Sweep


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "postgres":
        return request.getfixturevalue("postgres").create_database()
    return f"sqlite:///{tmp_path / 'store.db'}"


def test_migrations_build_exactly_the_models_schema(url):
    store = Store(url)
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}), Base.metadata) == []
        (head,) = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars()
    assert head == "0004"
    store.engine.dispose()


def test_a_database_from_before_migrations_is_adopted_with_its_rows(url):
    engine = create_engine(url)
    Base.metadata.create_all(engine)  # what the store did before it had migrations
    with engine.begin() as conn:
        conn.execute(Sweep.__table__.insert().values(id="old", name="kept", spec={}, task_name="t", model_name="m",
                                                     status="succeeded", mlflow_closed=True, created_at=_now(),
                                                     updated_at=_now()))  # fmt: skip
    engine.dispose()
    store = Store(url)
    with store.read() as s:
        assert s.get(Sweep, "old").name == "kept"
    assert VERSION_TABLE in inspect(store.engine).get_table_names()
    store.engine.dispose()


def test_optunas_own_version_table_is_left_alone(url):
    optuna.storages.RDBStorage(url)  # Optuna's tables and its alembic_version first, as after an adaptive sweep
    engine = create_engine(url)
    with engine.connect() as conn:
        optuna_version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    engine.dispose()
    store = Store(url)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == optuna_version
        assert conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one() == "0004"
    optuna.storages.RDBStorage(url)  # and Optuna still opens its storage
    store.engine.dispose()


def test_a_dataset_task_stored_before_prompt_format_keeps_its_prompts_raw(url):
    """0004: a stored dataset spec without task.prompt_format gets raw (what it trained with); one that chose a format
    and a built-in task are left as they are."""
    from alembic import command
    from alembic.config import Config

    from service.store import MIGRATIONS

    engine = create_engine(url)
    with engine.begin() as conn:  # the store as it was at 0003
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = conn
        command.upgrade(config, "0003")
    dataset = {"name": "dataset", "path": "d.jsonl", "rewards": [{"name": "exact_match"}]}
    specs = {
        "old": {"task": dataset},
        "chose": {"task": {**dataset, "prompt_format": "chat"}},
        "arith": {"task": {"name": "arithmetic"}},
    }
    with engine.begin() as conn:
        for id_, spec in specs.items():
            conn.execute(Sweep.__table__.insert().values(id=id_, name=id_, spec=spec, task_name="t", model_name="m",
                                                         status="succeeded", mlflow_closed=True, created_at=_now(),
                                                         updated_at=_now()))  # fmt: skip
    engine.dispose()
    store = Store(url)
    with store.read() as s:
        assert s.get(Sweep, "old").spec["task"] == {**dataset, "prompt_format": "raw"}
        assert s.get(Sweep, "chose").spec["task"]["prompt_format"] == "chat"
        assert s.get(Sweep, "arith").spec == {"task": {"name": "arithmetic"}}
    store.engine.dispose()


def _now():
    from service.store import utcnow

    return utcnow()
