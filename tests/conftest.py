"""Fixtures every test directory shares: a real PostgreSQL (tests/support/pg.py).

``pg_databases`` is the session's server — ``AGENTMAIL_TEST_PG`` when set, else a private
cluster started once per test process (per xdist worker) and stopped when the session ends;
``pg_dsn`` is a fresh, migrated database for one test; ``any_store`` is each store in turn.
No PostgreSQL: the test fails, naming the fix.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmaild.store.base import MailStore
from agentmaild.store.memory import MemoryMailStore
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.pg import (
    ENV_DSN,
    NoPostgres,
    PgCluster,
    PgDatabases,
    register,
    start_cluster,
)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster | None]:
    """The private cluster this session started; None when ``AGENTMAIL_TEST_PG`` names one."""
    if os.environ.get(ENV_DSN):
        yield None
        return
    try:
        cluster = start_cluster()
    except NoPostgres as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_databases(pg_cluster: PgCluster | None) -> Iterator[PgDatabases]:
    admin = os.environ.get(ENV_DSN) or (pg_cluster.admin_dsn if pg_cluster else "")
    databases = PgDatabases(admin)
    register(databases)
    try:
        yield databases
    finally:
        register(None)
        databases.drop_all()


@pytest.fixture
def pg_dsn(pg_databases: PgDatabases) -> Iterator[str]:
    """A fresh database with agentmaild's schema, dropped after the test."""
    dsn = pg_databases.create()
    yield dsn
    pg_databases.drop(dsn)


STORE_KINDS = ["sqlite", "memory", "postgres"]


@pytest.fixture(params=STORE_KINDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MailStore]:
    """Each of the three stores in turn: the contract holds for all of them."""
    if request.param == "postgres":
        databases: PgDatabases = request.getfixturevalue("pg_databases")
        dsn = databases.create()
        s: MailStore = PostgresMailStore(dsn)
        yield s
        s.close()
        databases.drop(dsn)
        return
    s = SqliteMailStore(tmp_path / "mail.db") if request.param == "sqlite" else MemoryMailStore()
    yield s
    s.close()
