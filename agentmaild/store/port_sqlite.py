"""The cold paths' port on a SQLite file (``SqlitePort``, see ``ports``): the hooks, ``check
--inject`` and the tmux channel's reads, on a connection of their own. Stdlib only.
"""

from __future__ import annotations

import os
import sqlite3

from agentmaild.errors import StoreError
from agentmaild.ids import iso_now
from agentmaild.store.ports import Port
from agentmaild.store.pull import mark_reached, mark_read, nudge_rows_for, take_unread_rows
from agentmaild.store.queries import SQLITE, Q, named

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from agentmaild.store.ports import Rows, Taken

    T = TypeVar("T")

P = named("ports.sql", SQLITE)


def open_connection(path: str) -> sqlite3.Connection:
    """A connection to the existing store at ``path`` (never created here: the file exists, so
    SQLite gives the WAL and shared-memory files its 0600 mode), migrated when it is older."""
    from agentmaild.store.migrate import SCHEMA_VERSION

    links = _links(path)
    if links > 1:  # SQLite finds the WAL by name: a second name means a second WAL
        from agentmaild.store.files import hard_link_error

        raise hard_link_error(path, links)
    # Any one thread at a time: the tmux channel reads through a port from anyio's workers.
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint = 10000")  # = store.sqlite.SENDER_AUTOCHECKPOINT_PAGES
    if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
        # An old or Overstory-only file: let the full store run its migration once.
        conn.close()
        from agentmaild.store.sqlite import SqliteMailStore

        SqliteMailStore(path).close()
        return open_connection(path)
    conn.row_factory = sqlite3.Row
    return conn


def _links(path: str) -> int:
    """Hard links of the store file (1 for anything that is not a regular file)."""
    try:
        st = os.stat(path)
    except OSError:
        return 1
    return st.st_nlink if st.st_mode & 0o170000 == 0o100000 else 1  # S_ISREG, without `stat`


class SqlitePort(Port):
    """The cold paths' port on a SQLite file (see ``ports.Port``)."""

    __slots__ = ("conn", "on_wake")

    def __init__(
        self,
        conn: sqlite3.Connection,
        local: str,
        on_wake: Callable[[str, str], None] | None = None,
    ) -> None:
        self.conn, self.local, self.on_wake = conn, local, on_wake

    @classmethod
    def open(cls, path: str, on_wake: Callable[[str, str], None] | None) -> SqlitePort | None:
        if not os.path.exists(path):
            return None  # no store yet: nobody can have mail or a registration
        try:
            return cls(open_connection(path), path, on_wake)
        except sqlite3.Error as exc:
            if os.path.isdir(path):
                raise StoreError(f"{path}: is a directory, not a store file") from exc
            raise StoreError(f"store {path}: {exc}") from exc

    def write(self, work: Callable[[], T], *, wake: str = "") -> T:
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"store {self.local}: {exc}") from exc
        if wake and self.on_wake is not None:
            self.on_wake(self.local, wake)
        return result

    def _one(self, name: str, params: dict[str, Any]) -> Any:
        try:
            return self.conn.execute(P[name], params).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"store {self.local}: {exc}") from exc

    def set_state(self, agent: str, state: str, sid: str, only_from: str | None = None) -> None:
        params = {"state": state, "at": iso_now(), "sid": sid, "agent": agent,
                  "only_from": only_from}  # fmt: skip
        self.conn.execute(P["set_turn_state"], params)

    def record_seen(self, agent: str, sid: str | None, ids: list[str], keep_s: float) -> None:
        import time

        now = time.time()
        rows = [{"delivery_id": d, "agent": agent, "sid": sid, "at": iso_now(now)}
                for d in ids]  # fmt: skip
        self.conn.executemany(P["seen_insert"], rows)
        self.conn.execute(P["seen_prune"], {"before": iso_now(now - keep_s)})

    def turn(self, agent: str) -> tuple[str | None, str | None]:
        row = self._one("turn_state", {"agent": agent})
        return (None, None) if row is None else (row[0], row[1])

    def delivery_seen(self, delivery_id: str) -> bool:
        return self._one("seen", {"delivery_id": delivery_id}) is not None

    def has_unread(self, agent: str) -> bool:
        return self._one("has_unread", {"agent": agent}) is not None

    def knows(self, agent: str) -> bool:
        return bool(self._one("known", {"agent": agent})[0])

    def take(
        self, agent: str, budget: int, keep: Callable[[Rows], Rows] | None = None
    ) -> Taken | None:
        rows = [dict(r) for r in take_unread_rows(self.conn, agent, budget)]
        if keep is not None:
            rows = keep(rows)
        return self.taken(agent, rows) if rows else None

    def taken(self, agent: str, rows: Rows) -> Taken:
        from agentmaild.overstory.nudges import take_banner  # Overstory's marker, if any

        ids = [r["id"] for r in rows]
        lead = take_banner(
            self.local, agent, ids,
            is_read=lambda mid: bool((row := self._one("message_read", {"id": mid})) and row[0]),
            is_ours=lambda mid: self._one("nudge_ours", {"agent": agent, "id": mid}) is not None,
        )
        unread = self.conn.execute(P["unread_count"], {"agent": agent}).fetchone()[0]
        nudges = [dict(n) for n in nudge_rows_for(self.conn, agent, ids)]
        return rows, int(unread), nudges, lead

    def mark_read(self, agent: str, ids: list[str], by: str) -> None:
        mark_read(self.conn, ids, by)
        mark_reached(self.conn, agent)

    def claims(self) -> _Claims:
        return _Claims(self.conn)

    def settings(self, agent: str) -> dict[str, Any]:
        row = self._one("agent_settings", {"agent": agent})
        return _settings(row[0] if row is not None else None)

    def close(self) -> None:
        self.conn.close()

    def done(self) -> None:
        """Left open: closing the last connection would checkpoint the WAL, which the next
        writer or the daemon does anyway; the process ends with ``os._exit`` right after."""


def _settings(raw: object) -> dict[str, Any]:
    import json

    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class _Claims:
    """The connector's ``Tx`` calls ``store.midturn`` makes, on the port's connection (in its
    write: SQLite's one writer holds the whole file, so ``lock`` has nothing to take)."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, name: str, params: dict[str, Any]) -> int:
        return self.conn.execute(Q[name], params).rowcount

    def fetch_all(self, name: str, params: dict[str, Any]) -> list[Any]:
        return self.conn.execute(Q[name], params).fetchall()

    def fetch_one(self, name: str, params: dict[str, Any]) -> Any:
        return self.conn.execute(Q[name], params).fetchone()

    def json(self, value: object) -> str:
        import json

        return json.dumps(value)

    def lock(self, *keys: str) -> None:
        return
