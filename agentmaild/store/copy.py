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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentmaild.errors import StoreError
from agentmaild.store.base import MailStore

# Table -> columns, in the order both schemas declare them (am_registry and the schema versions
# are the destination's own: its registry version moves when the agents arrive).
TABLES: dict[str, tuple[str, ...]] = {
    "messages": ("id", "from_agent", "to_agent", "subject", "body", "type", "priority",
                 "thread_id", "payload", "read", "created_at", "broadcast_id", "delivery_id",
                 "acked_at", "acked_by"),
    "am_agents": ("name", "capability", "parent", "state", "channel", "command", "cwd",
                  "tmux_target", "tmux_socket", "preset", "session_id", "poll_interval_s",
                  "settings", "turn_state", "turn_state_at", "created_at", "updated_at",
                  "shutdown_requested_at", "host"),
    "am_deliveries": ("id", "agent", "state", "attempts", "failures", "lease_until",
                      "last_error", "created_at", "updated_at", "queue"),
    "am_idempotency": ("sender", "key", "content_hash", "message_ids", "created_at"),
    "am_rate_log": ("from_agent", "to_agent", "at"),
    "am_nudges": ("agent", "message_id", "reason", "created_at"),
    "am_prompt_seen": ("delivery_id", "agent", "session_id", "at"),
    "am_attempts": ("id", "delivery_id", "agent", "message_ids", "attempt", "outcome", "error",
                    "duration_s", "at"),
    "am_agent_procs": ("pid", "start_time", "pgid", "agent", "delivery_id", "daemon_pid",
                       "started_at"),
    # Schema 4 (PostgreSQL schema 2): the HTTP API's tokens and the team rules' state.
    "am_tokens": ("id", "agent", "scopes", "hash", "created_at", "expires_at", "revoked_at"),
    "am_recent_sends": ("digest", "message_ids", "at"),
    "am_thread_log": ("thread_id", "pair", "at"),
    "am_thread_holds": ("thread_id", "pair", "messages", "escalation_id", "held_at"),
    "am_counters": ("name", "value"),
    "am_escalated": ("message_id", "at"),
    "am_queue_members": ("queue", "agent"),
    # Schema 5 (PostgreSQL schema 3): the trust domains.
    "am_peers": ("name", "public_key", "key_id", "url", "created_at"),
    "am_nonces": ("nonce", "peer", "expires_at"),
    "am_peer_messages": ("message_id", "peer", "key_id", "origin_id"),
    "am_relayed": ("message_id", "peer", "relayed_at"),
}  # fmt: skip
# Stored as JSON text by SQLite, as jsonb by PostgreSQL.
JSON_COLUMNS = frozenset(
    {("am_agents", "command"), ("am_agents", "settings"), ("am_idempotency", "message_ids"),
     ("am_attempts", "message_ids"), ("am_recent_sends", "message_ids")}
)  # fmt: skip
FLOAT_COLUMNS = frozenset(
    {("am_agents", "poll_interval_s"), ("am_deliveries", "lease_until"), ("am_rate_log", "at"),
     ("am_attempts", "duration_s"), ("am_attempts", "at"), ("am_agent_procs", "started_at"),
     ("am_tokens", "created_at"), ("am_tokens", "expires_at"), ("am_tokens", "revoked_at"),
     ("am_recent_sends", "at"), ("am_thread_log", "at"), ("am_escalated", "at"),
     ("am_peers", "created_at"), ("am_nonces", "expires_at"), ("am_relayed", "relayed_at")}
)  # fmt: skip
_MUST_BE_EMPTY = ("messages", "am_agents", "am_deliveries", "am_attempts")

Rows = list[tuple[Any, ...]]


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


def canonical(table: str, rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Rows as plain values whatever store they came from: JSON decoded, REAL as float."""
    cols = TABLES[table]
    out: list[tuple[Any, ...]] = []
    for row in rows:
        values = []
        for col, value in zip(cols, row, strict=True):
            if value is not None and (table, col) in JSON_COLUMNS and isinstance(value, str):
                value = json.loads(value)
            elif value is not None and (table, col) in FLOAT_COLUMNS:
                value = float(value)
            values.append(value)
        out.append(tuple(values))
    return out


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
    from agentmaild.store.copy_pg import pg_read

    return pg_read(store)


def write_all(store: MailStore, data: dict[str, Rows]) -> None:
    from agentmaild.store.sqlite import SqliteMailStore

    if isinstance(store, SqliteMailStore):
        _sqlite_write(store.connection, data)
        return
    from agentmaild.store.copy_pg import pg_write

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
