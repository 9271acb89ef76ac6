"""The Claude Code hooks on a PostgreSQL store: every event does what it does on SQLite.

``PgHook`` is the ``Hook`` with its store work over one psycopg connection: the very handlers
(``Hook.user_prompt_submit`` and ``events.HANDLERS``) run unchanged on it — turn state and
session id, prompt-seen bookkeeping, mail delivered and acked in the write transaction (output
written before the commit, as on SQLite), PostToolUse's debounced mid-turn mail, Stop's bounded
``decision: block``. The differences: the marker files and ``hooks.log`` live beside the DSN's
anchor (``store.anchor``: this machine's stand-in for a store file), and waking the daemon is a
NOTIFY naming the agent (sent at commit), which reaches its daemon on whichever host it runs.

Loaded only when the store is a DSN, so the SQLite hot path never imports psycopg; this module
in turn imports nothing of the SQLite store.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import psycopg

from agentmaild import inject
from agentmaild.errors import StoreError
from agentmaild.hooks import deferred
from agentmaild.hooks.io import output_limit
from agentmaild.hooks.run import _SESSION_RE, SEEN_KEEP_S, Hook
from agentmaild.ids import iso_now
from agentmaild.inject_pg import take_rows
from agentmaild.store.anchor import anchor_for
from agentmaild.store.postgres_messages import mark_reached, mark_read
from agentmaild.store.postgres_tx import PQ, Conn, PostgresTransactions, connect

_SET_STATE = (
    "UPDATE am_agents SET turn_state = %(state)s, turn_state_at = %(at)s, session_id = CASE"
    " WHEN %(sid)s = '' THEN session_id"
    " WHEN channel IN ('spawn', 'stdin') THEN COALESCE(session_id, %(sid)s) ELSE %(sid)s END"
    " WHERE name = %(agent)s AND (%(from)s::text IS NULL OR turn_state = %(from)s)"
)
_SEEN_INSERT = (
    "INSERT INTO am_prompt_seen (delivery_id, agent, session_id, at)"
    " VALUES (%s, %s, %s, %s) ON CONFLICT (delivery_id) DO NOTHING"
)


def run_pg(hook: Hook, dsn: str) -> int:
    """The event of ``hook`` (its stdin already read and parsed) on the store ``dsn``."""
    hook.db_path = str(anchor_for(dsn))  # hooks.log and the marker files go beside the anchor
    pg = PgHook.adopt(hook, connect(dsn))
    try:
        return pg.dispatch()
    finally:
        pg.pg.close()


def serve_hook_pg(
    event: str, agent: str, raw: bytes, quiet: bool, store: PostgresTransactions,
    vendor: str = "claude",
) -> tuple[int, str, bool]:  # fmt: skip
    """``remote.serve_hook`` on the daemon's PostgreSQL store (``/v1/hooks/{event}``), on a
    connection of its own (from the pool when the daemon has one)."""
    from agentmaild.hooks.remote import serve_hook

    anchor = str(anchor_for(store.dsn))
    try:
        with store._lease() as conn:
            return serve_hook(event, agent, raw, quiet, None, anchor, vendor=vendor,
                              adopt=lambda hook: PgHook.adopt(hook, conn))  # fmt: skip
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreError(f"store write failed: {first}") from exc


class PgHook(Hook):
    __slots__ = ("pg",)

    pg: Conn

    @classmethod
    def adopt(cls, hook: Hook, conn: Conn) -> PgHook:
        """A ``PgHook`` holding everything ``hook`` holds, working on ``conn``."""
        new = cls.__new__(cls)
        for name in Hook.__slots__:
            setattr(new, name, getattr(hook, name))
        new.pg = conn
        return new

    def in_write(self, work: Callable[[], object], *, poke: bool = False) -> int:
        wake = poke and not self.quiet
        with self.pg.transaction():
            work()
            if wake:  # at commit, to the daemon of the agent's host, wherever that is
                self.pg.execute(PQ["notify_mail"], {"recipients": self.agent})
        if wake and self.poke is not None:
            self.poke()
        return 0

    def set_state(self, state: str, *, only_from: str | None = None) -> None:
        sid = self.text("session_id")
        sid = sid if re.match(_SESSION_RE, sid) else ""
        params = {"state": state, "at": iso_now(), "sid": sid, "agent": self.agent,
                  "from": only_from}  # fmt: skip
        self.pg.execute(_SET_STATE, params)

    def _record_seen(self, delivery_ids: list[str]) -> None:
        now = time.time()
        sid = self.text("session_id") or None
        rows = [(d, self.agent, sid, iso_now(now)) for d in delivery_ids]
        with self.pg.cursor() as cur:
            cur.executemany(_SEEN_INSERT, rows)
        self.pg.execute("DELETE FROM am_prompt_seen WHERE at < %s", (iso_now(now - SEEN_KEEP_S),))

    def turn_state(self) -> str | None:
        sql = "SELECT turn_state FROM am_agents WHERE name = %(a)s"
        row = self.pg.execute(sql, {"a": self.agent}).fetchone()
        state: str | None = None if row is None else row["turn_state"]
        return state

    def has_unread(self) -> bool:
        sql = "SELECT 1 FROM messages WHERE to_agent = %(a)s AND read = 0 LIMIT 1"
        return self.pg.execute(sql, {"a": self.agent}).fetchone() is not None

    def take(self, wrap: Callable[[str], str]) -> tuple[str, list[str]] | None:
        limit = output_limit()
        rows, unread, nudges = take_rows(self.pg, self.agent, limit - 2500)
        rows = deferred.skip_printed(self, rows)
        if not rows:
            return None
        return inject.fit_rows(rows, self.agent, unread, nudges, wrap, limit)

    def mark_delivered(self, ids: list[str]) -> None:
        mark_read(self.pg, ids, "hook")
        mark_reached(self.pg, self.agent)
