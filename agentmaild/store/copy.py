"""``store copy``: every row of one store into another (SQLite ↔ PostgreSQL), verified.

The source is read in one snapshot (SQLite: one read transaction; PostgreSQL: ``REPEATABLE READ
READ ONLY``), the destination — which must hold no mail, agents or deliveries yet — is written in
one transaction, so a failed copy leaves it as it was. Rows keep every value: message ids,
delivery ids, threads, read marks, leases, the history's ids. Afterwards each table is read back
from the destination and compared with what was read from the source: the row count and a
SHA-256 over the rows in a canonical form (JSON values decoded, REAL columns as floats, rows
sorted), so the two stores' different types (jsonb vs JSON text) compare equal when the values
are.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from agentmaild.errors import StoreError
from agentmaild.store.base import MailStore
from agentmaild.store.copy_tables import JSON_COLUMNS, TABLES, Rows, canonical

_MUST_BE_EMPTY = ("messages", "am_agents", "am_deliveries", "am_attempts")

@dataclass(frozen=True, slots=True)
class TableFigures:
    rows: int
    checksum: str


@dataclass(frozen=True, slots=True)
class CopyReport:
    source: dict[str, TableFigures]
    destination: dict[str, TableFigures]

    @property
    def ok(self) -> bool:
        return self.source == self.destination

    def mismatched(self) -> list[str]:
        return [t for t in TABLES if self.source.get(t) != self.destination.get(t)]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "tables": {
                t: {"rows": self.source[t].rows, "checksum": self.source[t].checksum,
                    "copied_rows": self.destination[t].rows,
                    "verified": self.source[t] == self.destination[t]}
                for t in TABLES
            },
        }  # fmt: skip


def figures(table: str, rows: Rows) -> TableFigures:
    digest = hashlib.sha256()
    for line in sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows):
        digest.update(line.encode())
        digest.update(b"\n")
    return TableFigures(rows=len(rows), checksum=digest.hexdigest())


def _select(table: str) -> str:
    return f"SELECT {', '.join(TABLES[table])} FROM {table}"


# -- SQLite side -------------------------------------------------------------------------------
def _sqlite_read(conn: sqlite3.Connection) -> dict[str, Rows]:
    conn.execute("BEGIN")  # one snapshot of every table
    try:
        return {t: canonical(t, conn.execute(_select(t)).fetchall()) for t in TABLES}
    finally:
        conn.execute("COMMIT")


def _sqlite_write(conn: sqlite3.Connection, data: dict[str, Rows]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        _refuse_filled(lambda t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
        for table, rows in data.items():
            cols = TABLES[table]
            marks = ", ".join("?" * len(cols))
            sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})"
            conn.executemany(sql, [_sqlite_values(table, r) for r in rows])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _sqlite_values(table: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        json.dumps(v) if v is not None and (table, c) in JSON_COLUMNS else v
        for c, v in zip(TABLES[table], row, strict=True)
    )


def _refuse_filled(count: Any) -> None:
    filled = [t for t in _MUST_BE_EMPTY if count(t)]
    if filled:
        raise StoreError(
            f"the destination store is not empty ({', '.join(filled)} hold rows): "
            "copy into a new store"
        )


# -- the copy ----------------------------------------------------------------------------------
def read_all(store: MailStore) -> dict[str, Rows]:
    """Every table of ``store`` in canonical form, from one snapshot."""
    from agentmaild.store.sqlite import SqliteMailStore

    if isinstance(store, SqliteMailStore):
        return _sqlite_read(store.connection)
    from agentmaild.store.copy_postgres import pg_read

    return pg_read(store)


def write_all(store: MailStore, data: dict[str, Rows]) -> None:
    from agentmaild.store.sqlite import SqliteMailStore

    if isinstance(store, SqliteMailStore):
        _sqlite_write(store.connection, data)
        return
    from agentmaild.store.copy_postgres import pg_write

    pg_write(store, data, _refuse_filled)


def copy_store(source: MailStore, destination: MailStore) -> CopyReport:
    """Copy every row of ``source`` into the empty ``destination``, then verify it."""
    try:
        data = read_all(source)
        write_all(destination, data)
        copied = read_all(destination)
    except sqlite3.Error as exc:
        raise StoreError(f"store copy failed: {exc}") from exc
    return CopyReport(
        source={t: figures(t, rows) for t, rows in data.items()},
        destination={t: figures(t, rows) for t, rows in copied.items()},
    )
