"""The team rules' part of the PostgreSQL store's insert: the loop guard (collapse, thread guard).

Mirrors ``sqlite_rules``. Where SQLite's single writer serialises two sends of one digest or on
one thread, advisory locks (``guard_keys``, taken by the insert) serialise them here.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from psycopg.types.json import Jsonb

from agentmaild.ids import iso_now
from agentmaild.models import Message
from agentmaild.store import checks
from agentmaild.store.guard import PRUNE_EVERY
from agentmaild.store.postgres_tx import PQ, Conn, one
from agentmaild.store.records import InsertRequest, InsertResult
from agentmaild.store.rows import message_params

Getter = Callable[[Conn, str], Message | None]


def guard_keys(req: InsertRequest) -> list[str]:
    """The advisory-lock names a send with loop-guard checks must hold for its transaction."""
    keys = []
    if req.collapse is not None:
        keys.append(f"collapse:{req.collapse[0]}")
    if req.thread_guard is not None:
        keys.append(f"thread:{req.thread_guard.thread_id}:{req.thread_guard.pair}")
    return keys


def bump(conn: Conn, name: str, n: int = 1) -> None:
    conn.execute(PQ["counter_bump"], {"name": name, "n": n})


def collapsed(conn: Conn, req: InsertRequest, get: Getter) -> InsertResult | None:
    """The earlier send this one repeats inside the window (counted as ``collapsed``), else None."""
    if req.collapse is None:
        return None
    digest, window_s = req.collapse
    since = checks.window_start(req.now, window_s)
    row = one(conn, PQ["recent_send_get"], {"digest": digest, "since": since})
    if row is None:
        return None
    found = [get(conn, i) for i in row["message_ids"]]
    messages = tuple(m for m in found if m is not None)
    if not messages:
        return None  # purged meanwhile: nothing to point at, so this one is new
    bump(conn, "collapsed")
    return InsertResult(messages=messages, duplicate=True, collapsed=True)


def trips_thread_guard(conn: Conn, req: InsertRequest) -> bool:
    """Count this send on its thread; True when it trips the cap (hold and escalation written).

    Raises ``LoopHeld`` when the thread is already held for the pair.
    """
    g = req.thread_guard
    if g is None:
        return False
    key = {"thread": g.thread_id, "pair": g.pair}
    if one(conn, PQ["thread_hold_get"], key) is not None:
        raise checks.held_error(g.thread_id, g.pair)
    since = checks.window_start(req.now, g.window_s)
    conn.execute(PQ["thread_log_trim"], {**key, "since": since})
    row = one(conn, PQ["thread_log_count"], {**key, "since": since})
    seen = int(row["n"]) if row else 0
    if not checks.trips_thread_cap(seen, g.max_messages):
        conn.execute(PQ["thread_log_put"], {**key, "at": req.now})
        return False
    stamp = iso_now(req.now)
    esc = g.escalation
    hold = {**key, "messages": seen, "escalation": esc.id, "stamp": stamp}
    conn.execute(PQ["thread_hold_put"], hold)
    conn.execute(PQ["insert_message"], message_params(esc))
    nudge = {"agent": esc.to_agent, "message_id": esc.id, "reason": "high escalation"}
    conn.execute(PQ["nudge_put"], {**nudge, "stamp": stamp})
    return True


def remember(conn: Conn, req: InsertRequest) -> None:
    """Note this send's digest, so a repeat inside the window collapses into it.

    One insert per send; about one send in ``PRUNE_EVERY`` (drawn at random: senders share no
    counter) also deletes the rows that left the window, which the lookup ignores meanwhile.
    """
    if req.collapse is None:
        return
    digest, window_s = req.collapse
    if os.urandom(1)[0] % PRUNE_EVERY == 0:
        conn.execute(PQ["recent_sends_trim"], {"before": checks.window_start(req.now, window_s)})
    ids = Jsonb([m.id for m in req.messages])
    conn.execute(PQ["recent_send_put"], {"digest": digest, "ids": ids, "at": req.now})
