"""Controller state in SQL through SQLAlchemy: sweeps, their trials and lr tunings, probes (SQLite by default).

Every sweep is committed before the API answers. Statuses are service.lifecycle's enums, and only
service.lifecycle writes them.
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, sessionmaker

from service.lifecycle import ProbeStatus, SweepStatus, TrialStatus, TuningStatus
from sweeps.planner import prompts_per_step
from sweeps.spec import SweepSpec


class ProbeKind(StrEnum):
    """What a Probe row runs: the variance-component probe, or the budgeted answer (sweeps.answer)."""

    PROBE = "probe"
    ANSWER = "answer"


VERSION_TABLE = "groupscale_alembic_version"  # not alembic_version: Optuna's schema version lives there
CHECK_ENV = "GROUPSCALE_CHECK_TRANSACTIONS"  # "1": a network call inside a store transaction raises (the tests set it)
_open = threading.local()  # .depth: how many store transactions this thread has open


class NetworkInTransaction(RuntimeError):
    """A tracking or Ray call was made while this thread had a store transaction open (checked when CHECK_ENV is 1)."""


def outside_transaction(fn: Callable) -> Callable:
    """Decorate a method that goes over the network (MLflow, Ray): with GROUPSCALE_CHECK_TRANSACTIONS=1 it raises
    NetworkInTransaction when called inside ``Store.session()`` or ``Store.read()``. A transaction held across a
    call that retries for minutes holds SQLite's write lock (and PostgreSQL's row locks) as long: the API's
    writes, and on SQLite its health check, would wait for it."""

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        if getattr(_open, "depth", 0) and os.environ.get(CHECK_ENV) == "1":
            raise NetworkInTransaction(f"{fn.__qualname__} called inside a store transaction")
        return fn(*args, **kwargs)

    return checked


@contextmanager
def _counted() -> Iterator[None]:
    _open.depth = getattr(_open, "depth", 0) + 1
    try:
        yield
    finally:
        _open.depth -= 1


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex[:12]


class UTCDateTime(TypeDecorator):
    """A timestamp read back as an aware UTC datetime on every backend (SQLite drops the offset, PostgreSQL
    answers in the session's time zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        return value.astimezone(UTC) if value is not None and value.tzinfo is not None else value

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    """Every table's rows have an id and when they were made and last changed (columns of each table, as a mixin's)."""

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class Sweep(Base):
    __tablename__ = "sweeps"

    name: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16), default=SweepStatus.QUEUED, index=True)
    spec: Mapped[dict] = mapped_column(JSON)
    task_name: Mapped[str] = mapped_column(String(64), index=True)  # the task_key (service.identity)
    model_name: Mapped[str] = mapped_column(String(4096))  # the model_key; indexed below: a hash index on PostgreSQL
    idempotency_key: Mapped[str | None] = mapped_column(String(256), unique=True, nullable=True)
    mlflow_experiment_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    mlflow_parent_run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    mlflow_closed: Mapped[bool] = mapped_column(Boolean, default=False)
    fit: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    trials: Mapped[list[Trial]] = relationship(back_populates="sweep", order_by="Trial.position")
    lr_tunings: Mapped[list[LrTuning]] = relationship(back_populates="sweep", order_by="LrTuning.created_at")

    # A B-tree entry is limited to ~2.7 kB on PostgreSQL and model paths may be 4096 characters; lookups
    # are by equality only. SQLite gets the same plain index as before.
    __table_args__ = (Index("ix_sweeps_model_name", "model_name", postgresql_using="hash"),)


class Trial(Base):
    __tablename__ = "sweep_trials"  # not "trials": Optuna's tables share this database (adaptive sweeps, tune_lr)

    sweep_id: Mapped[str] = mapped_column(ForeignKey("sweeps.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    group_size: Mapped[int] = mapped_column(Integer)
    samples_per_step: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default=TrialStatus.PENDING, index=True)
    metrics: Mapped[dict] = mapped_column(JSON, default=dict)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    sweep: Mapped[Sweep] = relationship(back_populates="trials")

    @property
    def prompts_per_step(self) -> int:  # N
        return prompts_per_step(self.samples_per_step, self.group_size)

    @classmethod
    def planned(cls, sweep_id: str, position: int, point: Any) -> Trial:
        """A pending trial of the sweep at ``position``, of a planned point (its group_size, samples_per_step and seed:
        a sweeps.planner.TrialPlan, an adaptive sweep's Point)."""
        g, b, seed = point.group_size, point.samples_per_step, point.seed
        return cls(sweep_id=sweep_id, position=position, group_size=g, samples_per_step=b, seed=seed)


class LrTuning(Base):
    """The learning-rate search at one (G, B) of a sweep with tune_lr (workers.tune_lr).

    status: service.lifecycle.TuningStatus; best_lr None: keep the spec's lr.
    """

    __tablename__ = "lr_tunings"

    sweep_id: Mapped[str] = mapped_column(ForeignKey("sweeps.id"), index=True)
    group_size: Mapped[int] = mapped_column(Integer)
    samples_per_step: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default=TuningStatus.PENDING, index=True)
    best_lr: Mapped[float | None] = mapped_column(Float, nullable=True)
    result: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    sweep: Mapped[Sweep] = relationship(back_populates="lr_tunings")


class Probe(Base):
    """A probe or an answer request (``kind``: one Ray task on a spec, workers.probe or workers.answers): status
    service.lifecycle.ProbeStatus; result is its JSON; progress what its task reported last (workers.progress: stage,
    label, done, total, and the stages it went through), kept once it ended."""

    __tablename__ = "probes"

    kind: Mapped[str] = mapped_column(String(16), default=ProbeKind.PROBE, server_default=ProbeKind.PROBE.value)
    status: Mapped[str] = mapped_column(String(16), default=ProbeStatus.QUEUED, index=True)
    spec: Mapped[dict] = mapped_column(JSON)
    result: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    progress: Mapped[dict | None] = mapped_column(JSON, nullable=True)


MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BASELINE = "0001"  # the schema that create_all made before migrations existed


def migrate(conn: Connection) -> None:
    """Bring the store's tables to the latest revision (service/migrations, Alembic, version table
    VERSION_TABLE). A database from before migrations (its tables, no version table) is stamped at
    BASELINE first, so nothing is created twice."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    tables = inspect(conn)
    if tables.has_table("sweeps") and not tables.has_table(VERSION_TABLE):
        command.stamp(config, BASELINE)
    command.upgrade(config, "head")


class Store:
    """Engine + session factory. SQLite gets WAL and a busy timeout so readers never block writers; a server
    database (PostgreSQL: postgresql+psycopg://...) gets pings that replace connections a restart has cut."""

    def __init__(self, url: str) -> None:
        sqlite = url.startswith("sqlite")
        if not sqlite:
            self.engine = create_engine(url, pool_pre_ping=True)
        else:
            self.engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

            @event.listens_for(self.engine, "connect")
            def _pragmas(conn, _record) -> None:
                conn.isolation_level = None  # pysqlite's own implicit BEGIN off: the "begin" hook below emits it
                cur = conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()

            @event.listens_for(self.engine, "begin")
            def _begin(conn) -> None:
                # A write transaction takes SQLite's write lock up front: a deferred one that reads and then
                # writes can fail with "database is locked" when another writer got in between.
                conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("read_only") else "BEGIN IMMEDIATE")

        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":  # controllers starting together must not race on the migration
                conn.execute(text("SELECT pg_advisory_xact_lock(7162840213)"))
            migrate(conn)
        self._specs: dict[tuple[str, str], SweepSpec] = {}
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._reads = sessionmaker(self.engine.execution_options(read_only=True), expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A write transaction (on SQLite it holds the write lock from its start), committed on exit."""
        with _counted(), self._sessions() as s, s.begin():
            yield s

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read transaction: on SQLite it takes no write lock, so readers never wait for the scheduler."""
        with _counted(), self._reads() as s, s.begin():
            yield s

    def set_spec(self, row: Sweep, spec: SweepSpec) -> None:
        """Store a sweep's validated spec and keep it parsed (a new sweep's, or service.extend's: the only change a
        stored spec gets); its row needs its id (flushed)."""
        row.spec = spec.model_dump(mode="json")
        self._specs[(type(row).__name__, row.id)] = spec

    def spec(self, row: Sweep | Probe) -> SweepSpec:
        """The row's stored spec, parsed once per sweep or probe (it changes only through set_spec)."""
        key = (type(row).__name__, row.id)
        if key not in self._specs:
            if len(self._specs) > 4096:  # bounded: a long-lived controller sees many sweeps
                self._specs.clear()
            self._specs[key] = SweepSpec.model_validate(row.spec)
        return self._specs[key]

    def get_sweep(self, s: Session, sweep_id: str, lock: bool = False) -> Sweep | None:
        """The sweep, or None; ``lock``: its row locked until ``s`` commits (SELECT ... FOR UPDATE on PostgreSQL,
        where a second locker waits and then finds the row as the first left it; SQLite serialises writers)."""
        return s.get(Sweep, sweep_id, with_for_update=lock, populate_existing=lock)

    def sweeps_with_status(self, s: Session, *statuses: str) -> list[Sweep]:
        return list(s.scalars(select(Sweep).where(Sweep.status.in_(statuses)).order_by(Sweep.created_at)))
