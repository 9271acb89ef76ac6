"""The daemon's PostgreSQL store on a connection pool (``[store] pg_pool_size``, psycopg_pool):
operations from several threads run at once, each on a connection of its own, and a connection
the server dropped fails one operation and is replaced for the next."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg

from agentmaild.config import load_config
from agentmaild.errors import StoreError
from agentmaild.models import Agent
from agentmaild.store.postgres import PostgresMailStore


def test_pooled_operations_run_at_once_on_connections_of_their_own(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn, pool_size=3)
    barrier = threading.Barrier(3, timeout=20)

    def together(conn: Any) -> int:
        pid = int(conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"])
        barrier.wait()  # passes only when all three hold a connection at the same time
        return pid

    try:
        with ThreadPoolExecutor(3) as pool:
            pids = list(pool.map(lambda _: store._read_with(together), range(3)))
    finally:
        store.close()
    assert len(set(pids)) == 3


def test_a_pooled_store_replaces_connections_the_server_dropped(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn, pool_size=2)
    try:
        store.add_agent(Agent(name="demo", capability="builder"))
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                "application_name = 'agentmaild' AND datname = current_database() "
                "AND pid <> pg_backend_pid()"
            ).fetchone()
        assert killed is not None and killed[0] >= 2  # the pool's connection and the store's own
        for _ in range(2):  # each pooled connection the server dropped fails once, at most
            with contextlib.suppress(StoreError):
                store.list_agents()
        assert [a.name for a in store.list_agents()] == ["demo"]  # replaced by the pool
    finally:
        store.close()


def test_the_pool_size_is_a_store_setting() -> None:
    assert load_config(env={}).store.pg_pool_size == 4
    assert load_config(env={"AGENTMAILD_STORE_PG_POOL_SIZE": "1"}).store.pg_pool_size == 1
