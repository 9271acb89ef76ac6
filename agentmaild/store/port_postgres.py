"""PostgreSQL's side of the cold paths' port (``ports.Port``): the hook's store work, the mail
taken for injection and the tmux channel's reads, on one psycopg connection.

The differences from SQLite's ``port_sqlite.SqlitePort`` stay in here: the take holds the agent's
advisory lock (serialised with the daemon's claims for it), a write's ``wake`` is a NOTIFY naming
the agent, sent at commit, which reaches its daemon on whichever host it runs, and psycopg's
errors leave as ``StoreError``. Loaded only for a PostgreSQL store: the SQLite cold path never
imports psycopg.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from agentmaild.errors import AgentmaildError, StoreError
from agentmaild.ids import iso_now
from agentmaild.store.location import StoreLocation
from agentmaild.store.messages import mark_reached, mark_read
from agentmaild.store.ports import Port
from agentmaild.store.postgres_tx import (
    PQ,
    Conn,
    PgTx,
    PostgresTransactions,
    connect,
    first_line,
    lock,
    redacted,
)
from agentmaild.store.pull import within
from agentmaild.store.queries import POSTGRES, named

if TYPE_CHECKING:
    from agentmaild.store.ports import Rows, Taken

T = TypeVar("T")
P = named("ports.sql", POSTGRES)


class PostgresPort(Port):
    """The port on a connection: its own (``open``: reopened when the server dropped it, between
    operations) or one lent by the daemon's store (``lend_port``)."""

    __slots__ = ("_conn", "dsn")

    def __init__(self, conn: Conn | None, local: str, dsn: str = "") -> None:
        self._conn, self.local, self.dsn = conn, local, dsn

    @classmethod
    def open(cls, location: StoreLocation) -> PostgresPort:
        port = cls(None, location.local, location.target)
        port.conn()  # a store that cannot be reached fails here, as a missing file would
        return port

    def conn(self) -> Conn:
        if self._conn is None or (self.dsn and (self._conn.closed or self._conn.broken)):
            try:
                self._conn = connect(self.dsn)
            except psycopg.Error as exc:
                raise StoreError(f"cannot reach store {redacted(self.dsn)}: {exc}") from exc
        return self._conn

    def write(self, work: Callable[[], T], *, wake: str = "") -> T:
        conn = self.conn()
        try:
            with conn.transaction():
                result = work()
                if wake:  # at commit, to the daemon of the agent's host, wherever that is
                    conn.execute(PQ["notify_mail"], {"recipients": wake})
        except AgentmaildError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"store write failed: {first_line(exc)}") from exc
        return result

    def _one(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        try:
            row: dict[str, Any] | None = self.conn().execute(P[name], params).fetchone()
        except psycopg.Error as exc:
            raise StoreError(f"store read failed: {first_line(exc)}") from exc
        return row

    def set_state(self, agent: str, state: str, sid: str, only_from: str | None = None) -> None:
        params = {"state": state, "at": iso_now(), "sid": sid, "agent": agent,
                  "only_from": only_from}  # fmt: skip
        self.conn().execute(P["set_turn_state"], params)

    def record_seen(self, agent: str, sid: str | None, ids: list[str], keep_s: float) -> None:
        now = time.time()
        rows = [{"delivery_id": d, "agent": agent, "sid": sid, "at": iso_now(now)}
                for d in ids]  # fmt: skip
        conn = self.conn()
        with conn.cursor() as cur:
            cur.executemany(P["seen_insert"], rows)
        conn.execute(P["seen_prune"], {"before": iso_now(now - keep_s)})

    def turn(self, agent: str) -> tuple[str | None, str | None]:
        row = self._one("turn_state", {"agent": agent})
        return (None, None) if row is None else (row["turn_state"], row["turn_state_at"])

    def delivery_seen(self, delivery_id: str) -> bool:
        return self._one("seen", {"delivery_id": delivery_id}) is not None

    def has_unread(self, agent: str) -> bool:
        return self._one("has_unread", {"agent": agent}) is not None

    def knows(self, agent: str) -> bool:
        row = self._one("known", {"agent": agent})
        return bool(row and row["known"])

    def take(
        self, agent: str, budget: int, keep: Callable[[Rows], Rows] | None = None
    ) -> Taken | None:
        conn = self.conn()
        lock(conn, f"agent:{agent}")  # serialised with the daemon's claims for this agent
        rows: Rows = within(conn.execute(PQ["pull_candidates"], {"agent": agent}), budget)
        if keep is not None:
            rows = keep(rows)
        return self.taken(agent, rows) if rows else None

    def taken(self, agent: str, rows: Rows) -> Taken:
        conn = self.conn()
        count = conn.execute(P["unread_count"], {"agent": agent}).fetchone()
        wanted = {r["id"] for r in rows}
        nudges = [dict(n) for n in conn.execute(PQ["nudges_for"], {"agent": agent})
                  if n["message_id"] in wanted]  # fmt: skip
        return rows, int(count["n"]) if count else len(rows), nudges, ""

    def mark_read(self, agent: str, ids: list[str], by: str) -> None:
        tx = PgTx(self.conn())
        mark_read(tx, ids, by)
        mark_reached(tx, agent)

    def claims(self) -> PgTx:
        return PgTx(self.conn())

    def settings(self, agent: str) -> dict[str, Any]:
        row = self._one("agent_settings", {"agent": agent})
        value = row["settings"] if row is not None else None
        return value if isinstance(value, dict) else {}

    def close(self) -> None:
        if self.dsn and self._conn is not None:
            self._conn.close()  # a lent connection goes back to its owner instead


@contextmanager
def lend_port(store: object) -> Iterator[PostgresPort]:
    """A port on a connection of the daemon's open PostgreSQL ``store`` (from its pool)."""
    if not isinstance(store, PostgresTransactions):
        raise StoreError(f"this store offers no port: {type(store).__name__}")
    local = StoreLocation.of(store.dsn).local
    try:
        with store._lease() as conn:
            yield PostgresPort(conn, local)
    except psycopg.Error as exc:
        raise StoreError(f"store write failed: {first_line(exc)}") from exc
