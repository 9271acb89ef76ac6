"""The team rules' part of the SQLite store's insert: the loop guard (collapse, thread guard)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from agentmaild.ids import iso_now
from agentmaild.models import Message
from agentmaild.store import checks
from agentmaild.store.guard import PRUNE_EVERY
from agentmaild.store.queries import Q
from agentmaild.store.records import InsertRequest, InsertResult
from agentmaild.store.rows import message_params

Getter = Callable[[sqlite3.Connection, str], Message | None]


def bump(conn: sqlite3.Connection, name: str, n: int = 1) -> None:
    conn.execute(Q["counter_bump"], {"name": name, "n": n})


def collapsed(conn: sqlite3.Connection, req: InsertRequest, get: Getter) -> InsertResult | None:
    """The earlier send this one repeats inside the window (counted as ``collapsed``), else None."""
    if req.collapse is None:
        return None
    digest, window_s = req.collapse
    params = {"digest": digest, "since": checks.window_start(req.now, window_s)}
    row = conn.execute(Q["recent_send_get"], params).fetchone()
    return None if row is None else collapse_into(conn, row[0], get)


def collapse_into(conn: sqlite3.Connection, message_ids: str, get: Getter) -> InsertResult | None:
    """The earlier send (``message_ids``, its JSON list) a repeat collapses into, else None."""
    found = [get(conn, i) for i in json.loads(message_ids)]
    messages = tuple(m for m in found if m is not None)
    if not messages:
        return None  # purged meanwhile: nothing to point at, so this one is new
    bump(conn, "collapsed")
    return InsertResult(messages=messages, duplicate=True, collapsed=True)


def trips_thread_guard(conn: sqlite3.Connection, req: InsertRequest) -> bool:
    """Count this send on its thread; True when it trips the cap (hold and escalation written).

    Raises ``LoopHeld`` when the thread is already held for the pair.
    """
    g = req.thread_guard
    if g is None:
        return False
    key = {"thread": g.thread_id, "pair": g.pair}
    if conn.execute(Q["thread_hold_get"], key).fetchone() is not None:
        raise checks.held_error(g.thread_id, g.pair)
    since = checks.window_start(req.now, g.window_s)
    conn.execute(Q["thread_log_trim"], {**key, "since": since})
    seen = int(conn.execute(Q["thread_log_count"], {**key, "since": since}).fetchone()[0])
    if not checks.trips_thread_cap(seen, g.max_messages):
        conn.execute(Q["thread_log_put"], {**key, "at": req.now})
        return False
    stamp = iso_now(req.now)
    esc = g.escalation
    hold = {**key, "messages": seen, "escalation": esc.id, "stamp": stamp}
    conn.execute(Q["thread_hold_put"], hold)
    conn.execute(Q["insert_message"], message_params(esc))
    nudge = {"agent": esc.to_agent, "message_id": esc.id, "reason": "high escalation"}
    conn.execute(Q["nudge_put"], {**nudge, "stamp": stamp})
    return True


def remember(conn: sqlite3.Connection, req: InsertRequest) -> None:
    """Note this send's digest, so a repeat inside the window collapses into it.

    One insert per send; every ``PRUNE_EVERY``-th row (by rowid, whichever process wrote it)
    also deletes the rows that left the window. Expired rows left until then are harmless: the
    lookup (``collapsed``) only matches rows inside the window.
    """
    if req.collapse is None:
        return
    digest, window_s = req.collapse
    ids = json.dumps([m.id for m in req.messages])
    params = {"digest": digest, "ids": ids, "at": req.now}
    row = conn.execute(Q["recent_send_put"], params).lastrowid
    if row is not None and row % PRUNE_EVERY == 0:
        conn.execute(Q["recent_sends_prune"], {"before": checks.window_start(req.now, window_s)})
