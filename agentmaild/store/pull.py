"""SQLite's cold path: the pull side's one write (take unread mail, ack it), shared by the store
and the cold paths' port on a SQLite file (``port_sqlite``).

Plain functions over a ``sqlite3.Connection`` returning rows, so the hot path can use them without
importing the models (dataclasses) or the rest of the store.
"""

from __future__ import annotations

import sqlite3

from agentmaild.ids import iso_now
from agentmaild.store.queries import Q

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


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
