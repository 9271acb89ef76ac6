"""The change mark of each store: one cheap read whose value moves whenever anything was committed,
so "did anything change since mark M?" is one comparison.

- SQLite: ``PRAGMA data_version`` of the connection that reads it; it moves when *another*
  connection commits (a reader's own connection never writes).
- PostgreSQL: the snapshot's ``xmax``, the next transaction id to be assigned; it moves whenever
  any transaction wrote — at worst more often than our tables change, never less.

One definition each, read by the daemon's poll gates (``store.aio.PollGate``,
``store.aio_postgres.PgPollGate``), the dashboard's readers and ``ask``'s wait on a store with no
daemon (``MailStore.change_mark``). Stdlib only.
"""

from __future__ import annotations

from typing import Any

SQLITE_MARK = "PRAGMA data_version"
POSTGRES_MARK = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS mark"


def sqlite_mark(conn: Any) -> int:
    """The mark read on a ``sqlite3`` connection."""
    return int(conn.execute(SQLITE_MARK).fetchone()[0])


def postgres_mark(row: Any) -> int:
    """The mark from ``POSTGRES_MARK``'s row (a dict row or a tuple)."""
    return int(row["mark"] if isinstance(row, dict) else row[0])
