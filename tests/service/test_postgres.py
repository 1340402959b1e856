"""PostgreSQL as the controller's store and as the MLflow server's backend (a real server: tests/postgres.py)."""

import random
import threading
import time

import psycopg
from fastapi.testclient import TestClient
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
from sqlalchemy import select

from service.main import create_app
from service.settings import Settings
from service.stack import start_mlflow, stop_process_group
from service.store import Store, Sweep
from sweeps.spec import SweepSpec
from tests.factories import spec
from tests.ports import free_port
from tests.postgres import PostgresServer


def test_mlflow_server_with_a_postgres_backend(postgres, tmp_path):
    url = postgres.create_database()
    port = free_port()
    proc = start_mlflow(tmp_path, "127.0.0.1", port, backend_store_uri=url)
    try:
        client = MlflowClient(f"http://127.0.0.1:{port}")
        exp = client.create_experiment("pg-backend")
        run = client.create_run(exp, run_name="trial")
        now = int(time.time() * 1000)
        client.log_batch(run.info.run_id, metrics=[Metric("gap", 1.0 / (s + 1), now, s) for s in range(5)])
        client.log_metric(run.info.run_id, "reward", 0.5, step=0)
        client.set_terminated(run.info.run_id)
        history = sorted(client.get_metric_history(run.info.run_id, "gap"), key=lambda m: m.step)
        assert [(m.step, m.value) for m in history] == [(s, 1.0 / (s + 1)) for s in range(5)]
        got = client.get_run(run.info.run_id)
        assert got.data.metrics == {"gap": 0.2, "reward": 0.5} and got.info.status == "FINISHED"
    finally:
        stop_process_group(proc)
    # The runs are in PostgreSQL, not in a SQLite file next to the artifacts.
    assert not (tmp_path / "mlflow.db").exists()
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        assert conn.execute("SELECT count(*) FROM metrics WHERE key = 'gap'").fetchone()[0] == 5


def test_store_on_postgres_takes_concurrent_writers(postgres):
    store = Store(postgres.create_database())
    n, errors, start = 20, [], threading.Barrier(20)

    def write(i: int) -> None:
        try:
            start.wait()
            with store.session() as s:
                s.add(Sweep(name=f"s{i}", spec={"i": i}, task_name="arithmetic", model_name="tiny-llama", status="queued"))
            with store.session() as s:  # and a concurrent read-modify-write of its own row
                s.get(Sweep, s.scalar(select(Sweep.id).where(Sweep.name == f"s{i}"))).status = "running"
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(repr(e))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    with store.session() as s:
        rows = store.sweeps_with_status(s, "running")
        assert sorted(r.name for r in rows) == sorted(f"s{i}" for i in range(n))
        assert all(r.created_at.utcoffset().total_seconds() == 0 for r in rows)  # aware UTC, as on SQLite
    store.engine.dispose()


def test_store_on_postgres_takes_any_model_path_and_outlives_a_server_restart():
    with PostgresServer() as pg:
        store = Store(pg.create_database("gs_restart"))
        # 4096 random characters: beyond a B-tree entry's ~2.7 kB (the model_name index is a hash index).
        path = "/" + "".join(random.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=4095))
        with store.session() as s:
            s.add(Sweep(name="long", spec={}, task_name="arithmetic", model_name=path))
        pg.restart()  # every pooled connection is now dead; pool_pre_ping replaces them
        with store.session() as s:
            assert s.scalar(select(Sweep.name).where(Sweep.model_name == path)) == "long"
            s.add(Sweep(name="after", spec={}, task_name="arithmetic", model_name="tiny-llama"))
        with store.session() as s:
            assert len(store.sweeps_with_status(s, "queued")) == 2
        store.engine.dispose()


def test_two_purges_of_one_sweep_one_wins_the_other_is_404(postgres, tmp_path):
    """Both DELETE ?purge=true of one finished sweep at once, 20 rounds: one 200 and one 404 every round (on
    PostgreSQL both used to read the row before either deleted it, and both ran the clean-up)."""
    url = postgres.create_database()
    store = Store(url)
    settings = Settings(data_dir=tmp_path, database_url=url)
    stored = SweepSpec.model_validate(spec(name="p")).model_dump(mode="json")
    answers = []
    with TestClient(create_app(settings, run_scheduler=False)) as http:
        for i in range(20):
            with store.session() as s:
                sweep = Sweep(name=f"p{i}", spec=stored, task_name="arithmetic", model_name="tiny-llama", status="cancelled")
                sweep.mlflow_closed = True
                s.add(sweep)
                s.flush()
                sid = sweep.id
            start, codes = threading.Barrier(2), []

            def purge(sid: str = sid, start: threading.Barrier = start, codes: list = codes) -> None:
                start.wait()
                codes.append(http.delete(f"/v1/sweeps/{sid}", params={"purge": "true"}).status_code)

            threads = [threading.Thread(target=purge) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            answers.append(sorted(codes))
    store.engine.dispose()
    assert answers == [[200, 404]] * 20, answers
