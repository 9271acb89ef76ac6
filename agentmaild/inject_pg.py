"""``check --inject`` over a PostgreSQL store: take, render and ack in one transaction.

The SQLite hot path (``fast``) never loads this module, so psycopg stays out of it; a DSN store
pays for psycopg's import here instead.
"""

from __future__ import annotations

from typing import Any

from agentmaild import inject
from agentmaild.errors import UnknownAgent
from agentmaild.fast import refuse_unknown_configured
from agentmaild.store.checks import is_known
from agentmaild.store.postgres_messages import mark_reached, mark_read
from agentmaild.store.postgres_tx import PQ, Conn, Row, lock, one


def take_rows(conn: Conn, agent: str, budget: int) -> tuple[list[Row], int, list[Row]]:
    """In the caller's transaction, locked against the daemon's claims for ``agent``: its unread
    mail not in flight, priority order, cut at ``budget`` characters (at least one row), with
    the count of all its unread mail and the nudges of the rows taken."""
    lock(conn, f"agent:{agent}")  # serialised with the daemon's claims for this agent
    rows: list[Row] = []
    used = 0
    for row in conn.execute(PQ["pull_candidates"], {"agent": agent}):
        size = len(row["subject"]) + len(row["body"]) + len(row["payload"] or "")
        if rows and used + size > budget:
            break
        rows.append(row)
        used += size
    if not rows:
        return [], 0, []
    count = one(
        conn, "SELECT count(*) AS n FROM messages WHERE to_agent = %(a)s AND read = 0", {"a": agent}
    )
    wanted = {r["id"] for r in rows}
    nudges = [dict(n) for n in conn.execute(PQ["nudges_for"], {"agent": agent})
              if n["message_id"] in wanted]
    return rows, int(count["n"]) if count else len(rows), nudges


def _take_and_render(conn: Conn, agent: str, max_chars: int) -> tuple[str, list[str]]:
    rows, unread, nudges = take_rows(conn, agent, max_chars - 2500)
    if not rows:
        return "", []
    text, ids = inject.fit_rows(rows, agent, unread, nudges, inject.plain, max_chars)
    mark_read(conn, ids, "pull")
    mark_reached(conn, agent)
    return text, ids


def check_inject(dsn: str, agent: str, max_chars: int) -> tuple[str, list[str]]:
    """The agent's unread mail rendered for injection and acked; ``UnknownAgent`` for a name
    that was neither registered nor ever mailed."""
    from agentmaild.store.postgres import PostgresMailStore

    store = PostgresMailStore(dsn, create=False)
    try:
        text, ids = store._write(lambda conn: _take_and_render(conn, agent, max_chars))
        if not ids and not _is_known(store, agent):
            raise UnknownAgent(agent)
    finally:
        store.close()
    return text, ids


def _is_known(store: Any, agent: str) -> bool:
    """``checks.is_known``: registered, ever mailed, or any name when the config's
    ``refuse_unknown_recipients`` is off (loaded only for a name nobody knows)."""
    lookups = (
        lambda: store.get_agent(agent) is not None,
        lambda: store.list_messages(to_agent=agent, limit=1),
    )
    return is_known(agent, lookups=lookups, refuse_unknown=refuse_unknown_configured)


def take_and_render_on(store: Any, agent: str, max_chars: int) -> tuple[str, list[str]]:
    """``_take_and_render`` on an open ``PostgresMailStore`` (the HTTP API's ``inject`` take)."""
    from agentmaild.store.postgres import PostgresMailStore

    if not isinstance(store, PostgresMailStore):
        raise TypeError(f"not a PostgreSQL store: {type(store).__name__}")
    return store._write(lambda conn: _take_and_render(conn, agent, max_chars))
