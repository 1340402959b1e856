"""A throwaway PostgreSQL server for tests, started from the distribution's binaries (Debian: `postgresql`).

    with PostgresServer() as pg:
        url = pg.create_database("gs_store")   # postgresql+psycopg://postgres@127.0.0.1:PORT/gs_store

The server listens on 127.0.0.1 only, on a free port, with trust authentication and its socket in
its own temp folder; it runs as the `postgres` user when we are root (PostgreSQL refuses root).
Durability is off (fsync, synchronous_commit): it is a test server, deleted on exit.
"""

from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from tests.ports import free_port

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries here, or the server did not start (the message says how to fix it)."""


def find_bindir() -> Path:
    """The folder with initdb, pg_ctl and postgres: `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin."""
    candidates: list[Path] = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if out:
            candidates.append(Path(out))
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(re.sub(r"\D", "", Path(p).parent.name) or 0))
    candidates += [Path(p) for p in reversed(versions)]
    if shutil.which("initdb"):
        candidates.append(Path(shutil.which("initdb")).resolve().parent)
    for d in candidates:
        if all((d / exe).is_file() for exe in ("initdb", "pg_ctl", "postgres")):
            return d
    raise PostgresUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found via pg_config or in /usr/lib/postgresql/*/bin; "
        "install them: apt-get install -y --no-install-recommends postgresql (.ci/run does this when they are missing)"
    )


class PostgresServer:
    """Start on enter (or start()), stop and delete everything on exit (or stop()); restart() keeps the data."""

    user = "postgres"  # the database superuser created by initdb

    def __init__(self, start_timeout_s: float = 60.0) -> None:
        self.bindir = find_bindir()
        self.start_timeout_s = start_timeout_s
        self.port: int | None = None
        self.dir: Path | None = None
        self._as_root = os.geteuid() == 0

    # -- paths and commands -------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_path(self) -> Path:
        return self.dir / "postgres.log"

    def _run(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """Run a server binary, as the postgres OS user when we are root."""
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        # cwd: the postgres user may not be allowed into ours.
        return subprocess.run(cmd, cwd=self.dir, capture_output=True, text=True, timeout=timeout, check=False)

    def _check(self, proc: subprocess.CompletedProcess, what: str) -> None:
        if proc.returncode != 0:
            log = self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""
            raise PostgresUnavailable(f"{what} failed (exit {proc.returncode}): {proc.stdout}{proc.stderr}\n{log}")

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> PostgresServer:
        base = tempfile.gettempdir()
        if self._as_root:
            try:
                import pwd

                pw = pwd.getpwnam("postgres")
            except KeyError as e:
                raise PostgresUnavailable(
                    "running as root needs the `postgres` OS user (created by apt-get install postgresql)"
                ) from e
            if not os.stat(base).st_mode & 0o001:  # the postgres user must be able to reach the folder
                base = "/tmp"
        self.dir = Path(tempfile.mkdtemp(prefix="groupscale-pg-", dir=base))
        atexit.register(self.stop)
        try:
            if self._as_root:
                os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            initdb = ["initdb", "-D", str(self.data_dir), "-U", self.user, "--auth=trust", "--encoding=UTF8", "--no-locale"]
            self._check(self._run(*initdb, "--no-sync"), "initdb")
            self._start_server()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_server(self) -> None:
        last = None
        for _ in range(3):  # another test process may pick the same port in between
            self.port = self.port or free_port()
            opts = (
                f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.dir} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 "
                "-c timezone=UTC"
            )
            last = self._run(
                "pg_ctl",
                "start",
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_path),
                "-w",
                "-t",
                str(int(self.start_timeout_s)),
                "-o",
                opts,
            )
            if last.returncode == 0 and self._wait_ready():
                return
            self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "immediate")
            self.port = None
        self._check(last, "pg_ctl start")
        raise PostgresUnavailable(f"PostgreSQL did not accept connections within {self.start_timeout_s:.0f} s")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                    return True
            except psycopg.OperationalError:
                time.sleep(0.2)
        return False

    def restart(self) -> None:
        """Stop (fast: open connections are cut) and start again on the same port, keeping the data."""
        self._check(self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w"), "pg_ctl stop")
        self._start_server()

    def stop(self) -> None:
        """Stop the server and delete its folder; safe to call twice."""
        if self.dir is None:
            return
        if (self.data_dir / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w", timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None
        atexit.unregister(self.stop)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- databases ----------------------------------------------------------------------------
    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string (for psycopg.connect)."""
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={dbname}"

    def url(self, dbname: str) -> str:
        """The SQLAlchemy URL of a database on this server (MLflow takes the same form)."""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str | None = None) -> str:
        """Create a database (a fresh unique name when None) and return its SQLAlchemy URL."""
        name = name or f"gs_{uuid.uuid4().hex[:12]}"
        if not _NAME.match(name):
            raise ValueError(f"database name {name!r}: use lower-case letters, digits and _ (at most 63)")
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, closing its open connections first."""
        if not _NAME.match(name):
            raise ValueError(f"database name {name!r}")
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
