"""Schema upgrades keyed by ``PRAGMA user_version``, each inside one transaction; no row is lost.

Version 0 is "no agentmaild schema yet": an empty file, or a ``messages`` table written by
Overstory (possibly an old one without ``payload`` or without the newer message types).
"""

from __future__ import annotations

import re
import sqlite3

from agentmaild.mail.vocab import MESSAGE_TYPES
from agentmaild.store.queries import schema_statements

# 1: Overstory's table + agentmaild's columns and tables; 2: adds am_prompt_seen and the registry
# version (am_registry and its triggers); 3: am_attempts (delivery history) and am_agent_procs
# (agent process groups, for recovery); 4: am_tokens (HTTP API tokens), the team rules' tables
# (loop guard, escalations, queues) and columns; 5: the trust domains (am_peers, am_nonces,
# am_peer_messages, am_relayed) and am_agents.host (agents per host); 6: drops the loop guard's
# index on am_recent_sends(at) (it prunes in rowid order now); 7: am_idx_delivery holds only
# claimed mail (``WHERE delivery_id IS NOT NULL``), so a send writes no page of it; 8: am_settings
# (the store's own settings: the team rules its daemon writes); 9: am_queue_members.served_at
# (when the member last took work from the queue: the queue's turn); 10: am_usage (what each
# attempt cost) and am_budgets (the operator's raise or reset of a daily budget); 11: the message
# type ``interrupt`` in the type CHECK (the table is rebuilt). Every upgrade step below is
# idempotent, so one function takes any older file (or Overstory's) to the current version.
SCHEMA_VERSION = 11


# Columns agentmaild adds to Overstory's table: nullable, so Overstory's inserts never notice.
EXTRA_COLUMNS = {
    "broadcast_id": "TEXT",
    "delivery_id": "TEXT",
    "acked_at": "TEXT",
    "acked_by": "TEXT",
}
# Every lookup by delivery id (``delivery_id = ?``) implies NOT NULL, so SQLite takes the partial
# index for it; new mail (NULL) is not in it (schema 7).
DELIVERY_INDEX = (
    "CREATE INDEX IF NOT EXISTS am_idx_delivery ON messages(delivery_id)"
    " WHERE delivery_id IS NOT NULL"
)
EXTRA_INDEXES = (
    DELIVERY_INDEX,
    "CREATE INDEX IF NOT EXISTS am_idx_unread ON messages(to_agent) WHERE read = 0",
)
# Schema 4: columns added to agentmaild's own tables (nullable; the team rules' state).
AM_COLUMNS = {
    "am_agents": {"shutdown_requested_at": "TEXT", "host": "TEXT"},  # host: schema 5
    "am_deliveries": {"queue": "TEXT"},
    "am_queue_members": {"served_at": "REAL"},  # schema 9
}
OVERSTORY_COLUMNS = (
    "id, from_agent, to_agent, subject, body, type, priority, thread_id, payload, read, created_at"
)


def migrate(conn: sqlite3.Connection) -> None:
    if conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated while we waited for the write lock.
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            _upgrade(conn)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _table_sql(conn: sqlite3.Connection) -> str | None:
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'messages'"
    ).fetchone()
    return row[0] if row else None


def _columns(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    return {r[1]: r[2] for r in conn.execute(f"PRAGMA table_info({table})")}


def needs_rebuild(sql: str) -> bool:
    """Overstory's own test: a table without CHECKs, ``payload`` or a type is rebuilt."""
    if "CHECK" not in sql or not re.search(r"\bpayload\b", sql):
        return True
    return any(f"'{t}'" not in sql for t in MESSAGE_TYPES)


def _upgrade(conn: sqlite3.Connection) -> None:
    existing = _table_sql(conn)
    if existing is not None and needs_rebuild(existing):
        _rebuild_messages(conn)
    for stmt in schema_statements():
        conn.execute(stmt)
    have = _columns(conn, "messages")
    for name, decl in EXTRA_COLUMNS.items():
        if name not in have:
            conn.execute(f"ALTER TABLE messages ADD COLUMN {name} {decl}")
    _drop_full_delivery_index(conn)
    for stmt in EXTRA_INDEXES:
        conn.execute(stmt)
    conn.execute("DROP INDEX IF EXISTS am_idx_recent_sends_at")  # schema 6
    for table, columns in AM_COLUMNS.items():
        have = _columns(conn, table)
        for name, decl in columns.items():
            if name not in have:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")


def _drop_full_delivery_index(conn: sqlite3.Connection) -> None:
    """Schema 7: the index on every message's delivery id gives way to the partial one."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'am_idx_delivery'"
    ).fetchone()
    if row is not None and "WHERE" not in (row[0] or "").upper():
        conn.execute("DROP INDEX am_idx_delivery")


def _rebuild_messages(conn: sqlite3.Connection) -> None:
    """Recreate ``messages`` with the full CHECK lists, copying every row unchanged.

    SQLite cannot alter a CHECK constraint, so the table is renamed, recreated and copied, all
    inside the caller's transaction. Columns the old table had beyond Overstory's (e.g. a newer
    Overstory's ``project_id``) are carried over too.
    """
    old_cols = _columns(conn, "messages")
    conn.execute("ALTER TABLE messages RENAME TO am_messages_old")
    conn.execute("DROP INDEX IF EXISTS idx_inbox")
    conn.execute("DROP INDEX IF EXISTS idx_thread")
    create = next(
        s for s in schema_statements() if s.startswith("CREATE TABLE IF NOT EXISTS messages")
    )
    conn.execute(create)
    base = [c.strip() for c in OVERSTORY_COLUMNS.split(",")]
    extras = [c for c in old_cols if c not in base]
    for col in extras:
        conn.execute(f'ALTER TABLE messages ADD COLUMN "{col}" {old_cols[col] or ""}')
    select = [c if c in old_cols else "NULL" for c in base] + [f'"{c}"' for c in extras]
    target = base + [f'"{c}"' for c in extras]
    conn.execute(
        f"INSERT INTO messages ({', '.join(target)}) "
        f"SELECT {', '.join(select)} FROM am_messages_old"
    )
    conn.execute("DROP TABLE am_messages_old")
