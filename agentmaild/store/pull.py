"""SQLite's cold path: the pull side's one write (take unread mail, ack it) and the cold paths'
port on a SQLite file (``SqlitePort``, see ``ports``), shared by the store and the hooks.

Plain functions over a ``sqlite3.Connection`` returning rows, so the hot path can use them without
importing the models (dataclasses) or the rest of the store.
"""

from __future__ import annotations

import os
import sqlite3

from agentmaild.errors import StoreError
from agentmaild.ids import iso_now
from agentmaild.store.ports import Port
from agentmaild.store.queries import SQLITE, Q, named

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, TypeVar

    from agentmaild.store.ports import Rows, Taken

    T = TypeVar("T")

P = named("ports.sql", SQLITE)


def row_size(row: Any) -> int:
    return len(row["subject"]) + len(row["body"]) + len(row["payload"] or "")


def within(rows: Iterable[Any], max_chars: int) -> list[Any]:
    """The first of ``rows`` (messages) whose sizes add up to ``max_chars`` at most (0: all of
    them), and never fewer than one: a message larger than the budget still goes alone."""
    taken: list[Any] = []
    used = 0
    for row in rows:
        size = row_size(row)
        if max_chars and taken and used + size > max_chars:
            break
        taken.append(row)
        used += size
    return taken


def take_unread_rows(conn: sqlite3.Connection, agent: str, max_chars: int) -> list[sqlite3.Row]:
    """Unread mail not in flight to the daemon, priority order, cut at ``max_chars`` (≥ 1 row)."""
    return within(conn.execute(Q["pull_candidates"], {"agent": agent}), max_chars)


def mark_read(conn: sqlite3.Connection, ids: list[str], by: str) -> list[str]:
    """Mark ``ids`` read (when, by whom) and drop their nudges; returns the ids that changed."""
    return [message_id for message_id, _ in mark_read_pairs(conn, ids, by)]


def mark_read_pairs(conn: sqlite3.Connection, ids: list[str], by: str) -> list[tuple[str, str]]:
    """``mark_read`` returning ``(id, recipient)`` of each message that changed."""
    stamp = iso_now()
    done: list[tuple[str, str]] = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"UPDATE messages SET read = 1, acked_at = ?, acked_by = ? "
            f"WHERE id IN ({marks}) AND read = 0 RETURNING id, to_agent",
            (stamp, by, *chunk),
        ).fetchall()
        done.extend((r[0], r[1]) for r in rows)
        conn.executemany(
            "DELETE FROM am_nudges WHERE agent = ? AND message_id = ?", [(r[1], r[0]) for r in rows]
        )
    return done


def mark_reached(conn: sqlite3.Connection, agent: str) -> None:
    """The agent took mail: a registration still ``booting`` becomes ``working``."""
    conn.execute(Q["agent_reached"], {"stamp": iso_now(), "agent": agent})


def nudge_rows_for(conn: sqlite3.Connection, agent: str, ids: list[str]) -> list[sqlite3.Row]:
    """The nudges of just these messages (``mark_read`` drops them when it acks the messages).

    Nudges of mail left for a later batch stay queued, so its banner comes with it.
    """
    wanted = set(ids)
    return [r for r in conn.execute(Q["nudges_for"], {"agent": agent}) if r["message_id"] in wanted]


def take_nudge_rows(conn: sqlite3.Connection, agent: str) -> list[sqlite3.Row]:
    rows = conn.execute(Q["nudges_for"], {"agent": agent}).fetchall()
    conn.execute(Q["nudges_clear"], {"agent": agent})
    return rows


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
        if not rows:
            return None
        from agentmaild.overstory.nudges import take_banner  # Overstory's marker, if any

        ids = [r["id"] for r in rows]
        lead = take_banner(self.conn, self.local, agent, ids)
        unread = self.conn.execute(P["unread_count"], {"agent": agent}).fetchone()[0]
        nudges = [dict(n) for n in nudge_rows_for(self.conn, agent, ids)]
        return rows, int(unread), nudges, lead

    def mark_read(self, agent: str, ids: list[str], by: str) -> None:
        mark_read(self.conn, ids, by)
        mark_reached(self.conn, agent)

    def close(self) -> None:
        self.conn.close()

    def done(self) -> None:
        """Left open: closing the last connection would checkpoint the WAL, which the next
        writer or the daemon does anyway; the process ends with ``os._exit`` right after."""
