"""A real PostgreSQL for the tests: the server in ``AGENTMAIL_TEST_PG``, else a private cluster.

The private cluster is started from the installed binaries (``/usr/lib/postgresql/*/bin``, or
``pg_config --bindir``, or ``initdb`` on PATH) in a fresh directory under /tmp, as the
``postgres`` user when we are root (initdb refuses root), listening on a free loopback port and a
private socket directory — never on the machine's own service. It runs without fsync (tests do
not survive power loss anyway) and is stopped and removed by ``PgCluster.stop``.

Each test gets its own database, cloned from a template that was migrated once
(``CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY``: ~30 ms), dropped afterwards.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from tests.support.net import free_port

ENV_DSN = "AGENTMAIL_TEST_PG"
_PREFIX = "agentmaild-pg-"
_OWNER_FILE = "owner.pid"  # the test process that started the cluster (stale when it is gone)
_START_TIMEOUT_S = 60


class NoPostgres(RuntimeError):
    """No server given and no binaries to start one: the tests cannot run."""


def bindir() -> Path:
    """Where initdb and pg_ctl are; ``NoPostgres`` naming the fix when there are none."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version_key)
    if found:
        return Path(found[-1]).parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise NoPostgres(
        "PostgreSQL tests need a server: set AGENTMAIL_TEST_PG to a DSN, or install the "
        "PostgreSQL binaries (Debian: apt-get install postgresql; `.ci/run` does it)"
    )


def _version_key(path: str) -> tuple[int, ...]:
    part = Path(path).parent.parent.name
    return tuple(int(x) for x in part.split(".") if x.isdigit())



def _as_owner(argv: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *argv] if owner else argv


@dataclass
class PgCluster:
    """A private cluster this process started; ``admin_dsn`` reaches its ``postgres`` database."""

    root: Path
    port: int
    owner: str | None  # the user the server runs as (None: ourselves)
    bin: Path
    # durable: every commit reaches the WAL before it returns (synchronous_commit on), so an
    # immediate restart loses nothing a client saw committed (outage tests); fsync stays off,
    # which only matters if the machine itself goes down.
    durable: bool = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        argv = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]
        subprocess.run(_as_owner(argv, self.owner), capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def restart(self) -> None:
        """Stop the server at once and start it again on the same port (outage tests)."""
        argv = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]
        subprocess.run(_as_owner(argv, self.owner), capture_output=True, check=True)
        self._start()

    def _start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit={'on' if self.durable else 'off'} -c full_page_writes=off "
            "-c max_connections=200"
        )
        argv = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"),
                "-o", options, "-w", "-t", str(_START_TIMEOUT_S), "start"]
        done = subprocess.run(_as_owner(argv, self.owner), capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            log = (self.root / "log").read_text(errors="replace")[-2000:]
            raise NoPostgres(f"private PostgreSQL did not start: {done.stderr.strip()}\n{log}")


def _owner_alive(root: Path) -> bool:
    try:
        pid = int((root / _OWNER_FILE).read_text().strip())
    except (OSError, ValueError):
        return True  # being set up right now, or not ours to judge: leave it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale_clusters(binaries: Path, owner: str | None) -> None:
    """Stop and remove clusters whose test process died without stopping them (killed by a
    timeout or SIGKILL): a crashed run must not leave servers behind for the next one."""
    for root in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        if root.is_dir() and not _owner_alive(root):
            PgCluster(root=root, port=0, owner=owner, bin=binaries).stop()


def start_cluster(*, durable: bool = False) -> PgCluster:
    """initdb + start a private cluster; the caller stops it (``durable``: see ``PgCluster``)."""
    binaries = bindir()
    owner = "postgres" if os.geteuid() == 0 else None
    reap_stale_clusters(binaries, owner)
    root = Path(tempfile.mkdtemp(prefix=_PREFIX))
    (root / _OWNER_FILE).write_text(f"{os.getpid()}\n")
    if owner:
        entry = pwd.getpwnam(owner)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    root.chmod(0o700)
    initdb = [str(binaries / "initdb"), "-D", str(root / "data"), "-A", "trust", "-U",
              "postgres", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]
    done = subprocess.run(_as_owner(initdb, owner), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise NoPostgres(f"initdb failed: {done.stderr.strip()[-2000:]}")
    for _attempt in range(3):  # a free port can be taken between the probe and the bind
        cluster = PgCluster(root=root, port=free_port(), owner=owner, bin=binaries,
                            durable=durable)
        try:
            cluster._start()
            return cluster
        except NoPostgres:
                continue
    shutil.rmtree(root, ignore_errors=True)
    raise NoPostgres("private PostgreSQL did not start on a free port after 3 attempts")


def with_dbname(dsn: str, dbname: str) -> str:
    """``dsn`` pointing at another database, as a URL (what ``--db`` takes)."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info["dbname"] = dbname
    user = info.pop("user", "") or ""
    password = info.pop("password", None)
    host = info.pop("host", None) or "127.0.0.1"
    port = info.pop("port", None) or "5432"
    info.pop("dbname")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    query = "&".join(f"{k}={v}" for k, v in info.items())
    return f"postgresql://{auth}{host}:{port}/{dbname}" + (f"?{query}" if query else "")


_KEPT = ("am_registry", "am_schema_version")  # one row each: reset, not emptied
_TABLES_SQL = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"


def _tables(conn: psycopg.Connection[tuple[object, ...]]) -> set[str]:
    return {str(r[0]) for r in conn.execute(_TABLES_SQL).fetchall()}


def _empty_sql(tables: set[str]) -> str:
    """Empty every table of the schema (the list read from the migrated template, so a new
    schema step's tables are emptied too instead of making every hand-back a DROP DATABASE)."""
    return (
        "".join(f"DELETE FROM {t};" for t in sorted(tables) if t not in _KEPT)
        + "UPDATE am_registry SET version = 0;"
        + "ALTER TABLE am_attempts ALTER COLUMN id RESTART WITH 1;"
    )


@dataclass
class PgDatabases:
    """Fresh databases on one server, cloned from a template migrated once."""

    admin_dsn: str
    prefix: str = field(default_factory=lambda: f"am_{os.getpid()}_{uuid.uuid4().hex[:6]}")
    _template: str | None = None
    _schema_tables: set[str] = field(default_factory=set)
    _made: list[str] = field(default_factory=list)
    _free: list[str] = field(default_factory=list)
    _count: int = 0

    def _admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.admin_dsn, autocommit=True)

    def template(self) -> str:
        if self._template is None:
            from agentmaild.store.postgres import PostgresMailStore

            name = f"{self.prefix}_tpl"
            with self._admin() as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            self._made.append(name)
            dsn = with_dbname(self.admin_dsn, name)
            PostgresMailStore(dsn).close()
            with psycopg.connect(dsn, autocommit=True) as conn:
                self._schema_tables = _tables(conn)
            self._template = name
        return self._template

    def create(self, *, migrated: bool = True) -> str:
        """A migrated database with no rows (reused when one was handed back), or an empty one."""
        if migrated and self._free:
            return self._free.pop()
        self._count += 1
        name = f"{self.prefix}_{self._count}"
        source = self.template() if migrated else "template0"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}" STRATEGY FILE_COPY')
        self._made.append(name)
        return with_dbname(self.admin_dsn, name)

    def drop(self, dsn: str) -> None:
        """Hand a database back: emptied for the next test when its schema is intact, else gone.

        Emptying a few small tables takes a millisecond; creating a database under load takes a
        second, so a session reuses its databases.
        """
        name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
        with self._admin() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
        if self._empty(dsn):
            self._free.append(dsn)
            return
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self._made:
            self._made.remove(name)

    def _empty(self, dsn: str) -> bool:
        from agentmaild.store.postgres_migrate import PG_SCHEMA_VERSION

        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                with conn.transaction():
                    row = conn.execute(
                        "SELECT version FROM am_schema_version WHERE id = 1"
                    ).fetchone()
                    # A test that left tables of its own behind: dropped, not reused.
                    if (row is None or row[0] != PG_SCHEMA_VERSION
                            or _tables(conn) != self._schema_tables):
                        return False
                    conn.execute(_empty_sql(self._schema_tables))
        except psycopg.Error:
            return False
        return True

    def drop_all(self) -> None:
        self._free.clear()
        with self._admin() as conn:
            for name in reversed(self._made):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._made.clear()


_session: PgDatabases | None = None


def register(databases: PgDatabases | None) -> None:
    """The session's databases, for code that cannot take a fixture (hypothesis machines)."""
    global _session
    _session = databases


def session_databases() -> PgDatabases:
    if _session is None:
        raise NoPostgres("no PostgreSQL for this session: request the pg_databases fixture")
    return _session
