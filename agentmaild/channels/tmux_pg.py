"""The tmux channel's reads of the hooks' records (turn state, seen batch headers) when its store
is PostgreSQL: ``records_for`` gives the channel a connection-like reader for either store.

The readers (``tmux_signals.turn_state``, ``hooks.run.delivery_seen``) are written against
SQLite (``?`` placeholders, ``execute(...).fetchone()``); ``PgReader`` runs them unchanged on
the DSN behind the channel's anchor path, and turns a failed read into ``sqlite3.Error`` so the
channel treats it as it treats a failed SQLite read: the signal is unknown this time.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from agentmaild.store.anchor import is_anchor, store_target


class PgReader:
    """``execute(sql, params)`` with SQLite's placeholders, on a lazily (re)opened connection."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: Any = None  # a psycopg.Connection, loaded only for a PostgreSQL store

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        import psycopg

        try:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = psycopg.connect(
                    self._dsn, autocommit=True, application_name="agentmaild tmux"
                )
            return self._conn.execute(sql.replace("?", "%s"), params)
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise sqlite3.OperationalError(first) from exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def records_for(store_path: Path) -> sqlite3.Connection | PgReader:
    """Where the hooks' records of ``store_path`` are read: its SQLite file, or its DSN."""
    if is_anchor(store_path):
        return PgReader(store_target(store_path))
    return sqlite3.connect(str(store_path), timeout=2.0, check_same_thread=False)
