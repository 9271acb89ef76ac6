"""The PostgreSQL side of ``store copy``: one snapshot read, one transaction of writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from agentmaild.errors import AgentmaildError, StoreError
from agentmaild.store.base import MailStore
from agentmaild.store.copy_tables import JSON_COLUMNS, TABLES, Rows, canonical
from agentmaild.store.postgres import PostgresMailStore


def _pg(store: MailStore) -> PostgresMailStore:
    if not isinstance(store, PostgresMailStore):
        raise StoreError(f"store copy: cannot copy a {type(store).__name__}")
    return store


def pg_read(store: MailStore) -> dict[str, Rows]:
    conn = _pg(store).connection
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            data: dict[str, Rows] = {}
            for table, cols in TABLES.items():
                rows = conn.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
                data[table] = canonical(table, [tuple(r[c] for c in cols) for r in rows])
            return data
        finally:
            conn.execute("COMMIT")
    except psycopg.Error as exc:
        raise StoreError(f"store copy: reading {store_name(store)} failed: {exc}") from exc


def pg_write(store: MailStore, data: dict[str, Rows], refuse_filled: Callable[[Any], None]) -> None:
    conn = _pg(store).connection

    def count(table: str) -> int:
        row = conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()
        return int(row["n"]) if row else 0

    try:
        with conn.transaction():
            conn.execute(f"LOCK TABLE {', '.join(TABLES)} IN EXCLUSIVE MODE")
            refuse_filled(count)
            for table, rows in data.items():
                _insert(conn, table, rows)
            # The history's ids were copied as they were: the next one follows the largest.
            conn.execute(
                "SELECT setval(pg_get_serial_sequence('am_attempts', 'id'), "
                "coalesce(max(id), 0) + 1, false) FROM am_attempts"
            )
    except AgentmaildError:
        raise
    except psycopg.Error as exc:
        raise StoreError(f"store copy: writing {store_name(store)} failed: {exc}") from exc


def _insert(conn: Any, table: str, rows: Rows) -> None:
    cols = TABLES[table]
    marks = ", ".join(["%s"] * len(cols))
    overriding = " OVERRIDING SYSTEM VALUE" if table == "am_attempts" else ""
    sql = f"INSERT INTO {table} ({', '.join(cols)}){overriding} VALUES ({marks})"
    values = [
        tuple(Jsonb(v) if v is not None and (table, c) in JSON_COLUMNS else v
              for c, v in zip(cols, row, strict=True))
        for row in rows
    ]
    with conn.cursor() as cur:
        cur.executemany(sql, values)


def store_name(store: MailStore) -> str:
    """The store as a person reads it: its path, or its DSN without the password."""
    return store.location.shown
