"""The common send as one statement: ``am_send_one`` (sql/functions.sql).

A send of one message with no idempotency key, no rate limit, no thread guard and no other
registry's states is, on PostgreSQL, one call of a server-side function that takes the same
locks, makes the same checks and writes the same rows, in the same order, as the general send
(``postgres_messages._insert``): one round trip and one statement instead of nine, no BEGIN and
COMMIT. It writes only when every check passes; on anything else it writes nothing and answers
'slow', and the store runs the general send, which gives the same answer it always did.
"""

from __future__ import annotations

import os
from typing import Any

from agentmaild.ids import iso_now
from agentmaild.models import REFUSED_STATES
from agentmaild.store import checks
from agentmaild.store.guard import PRUNE_EVERY
from agentmaild.store.postgres_rules import guard_keys
from agentmaild.store.postgres_tx import PQ, Conn, lock_names, notify_payload
from agentmaild.store.records import InsertRequest
from agentmaild.store.rows import message_params

# psycopg dumps a list parameter in Python (tens of µs a send); the refused states are constants,
# so they are written into the statement once, as an array literal.
_SEND_ONE = PQ["send_one"].replace(
    "{refused}", "'{" + ",".join(sorted(REFUSED_STATES)) + "}'"
)


def insert_lock_keys(req: InsertRequest) -> list[str]:
    """The advisory locks a send holds: its inboxes (when capped or rate-limited), the inboxes
    of the recipients it checks (an agent ending or removed takes that lock too, schema 9), the
    loop guard's names, its idempotency key."""
    keys = [f"inbox:{m.to_agent}" for m in req.messages if req.unread_max or req.rate_limit_max]
    keys += [f"inbox:{name}" for name in req.check_recipients]
    keys += guard_keys(req)
    if req.idempotency is not None:
        keys.append(f"idem:{req.idempotency[0]}:{req.idempotency[1]}")
    return keys


def send_one_params(req: InsertRequest) -> dict[str, Any] | None:
    """``am_send_one``'s arguments for ``req``; None when it needs the general send."""
    if (
        len(req.messages) != 1
        or req.idempotency is not None
        or req.rate_limit_max > 0
        or req.thread_guard is not None
        or req.known_elsewhere
        or len(req.check_recipients) > 1
    ):
        return None
    locks = lock_names(insert_lock_keys(req))
    if len(locks) > 2:  # one message, no idempotency key, no thread guard: never more than two
        return None
    m = req.messages[0]
    nudge = None
    if req.nudges:
        (agent, message_id, reason), *more = req.nudges
        if more or agent != m.to_agent or message_id != m.id:
            return None
        nudge = reason
    digest = since = trim_before = None
    if req.collapse is not None:
        digest, window_s = req.collapse
        since = checks.window_start(req.now, window_s)
        if os.urandom(1)[0] % PRUNE_EVERY == 0:  # as postgres_rules.remember draws it
            trim_before = since
    return {
        **message_params(m),
        "lock1": locks[0] if locks else None,
        "lock2": locks[1] if len(locks) > 1 else None,
        "check": req.check_recipients[0] if req.check_recipients else None,
        "refuse_unknown": req.refuse_unknown,
        "unread_max": max(req.unread_max, 0),
        "digest": digest,
        "since": since,
        "trim_before": trim_before,
        "now": req.now,
        "notify": notify_payload({m.to_agent}),
        "nudge": nudge,
        "stamp": iso_now(req.now),
    }


def send_one(conn: Conn, params: dict[str, Any]) -> bool:
    """True when ``am_send_one`` sent; False when it wrote nothing (the general send runs)."""
    row = conn.kept_cursor().execute(_SEND_ONE, params).fetchone()
    return row is not None and row["outcome"] == "sent"
