"""The send, written once over the connector: an insert with every rule it carries.

In one write transaction, in this order: the advisory locks the send's rules need (``lock_keys``;
PostgreSQL serialises racing sends with them, SQLite's single writer needs none), an idempotent
retry or a collapsed repeat answered instead of a write, the recipients checked, the unread cap,
the rate limit, the thread guard, then the rows (messages, the digest remembered, nudges, the
idempotency key) and the wake-up at commit. Each rule is decided, and its error worded, in
``checks``. A one-message send with at most one recipient checked and no idempotency key reads
what it checks in one statement (``send_probe``).

Where the dialect offers the whole common send as one statement (PostgreSQL's ``am_send_one``,
``sql/functions.sql``), ``send_one_params`` gives its arguments: it writes what this module would,
or nothing, and then this module's send runs and answers.
"""

from __future__ import annotations

import os
from typing import Any

from agentmaild.ids import iso_now
from agentmaild.models import Message
from agentmaild.store import checks
from agentmaild.store.connector import Tx, lock_names, notify_payload
from agentmaild.store.guard import PRUNE_EVERY
from agentmaild.store.records import InsertRequest, InsertResult
from agentmaild.store.rows import message_from_row, message_params


def lock_keys(req: InsertRequest) -> list[str]:
    """The locks a send holds: its inboxes (when capped or rate-limited), the inboxes of the
    recipients it checks (an agent ending or removed takes that lock too), the loop guard's
    names, its idempotency key."""
    keys = [f"inbox:{m.to_agent}" for m in req.messages if req.unread_max or req.rate_limit_max]
    keys += [f"inbox:{name}" for name in req.check_recipients]
    if req.collapse is not None:
        keys.append(f"collapse:{req.collapse[0]}")
    if req.thread_guard is not None:
        keys.append(f"thread:{req.thread_guard.thread_id}:{req.thread_guard.pair}")
    if req.idempotency is not None:
        keys.append(f"idem:{req.idempotency[0]}:{req.idempotency[1]}")
    return keys


def get(tx: Tx, message_id: str) -> Message | None:
    row = tx.fetch_one("get_message", {"id": message_id})
    return message_from_row(row) if row is not None else None


def find_idempotent(tx: Tx, sender: str, key: str, digest: str) -> InsertResult | None:
    row = tx.fetch_one("idem_get", {"sender": sender, "key": key})
    if row is None:
        return None
    conflict = checks.idempotency_conflict(sender, key, row["content_hash"], digest)
    if conflict is not None:
        raise conflict
    found = [get(tx, i) for i in tx.from_json(row["message_ids"])]
    return InsertResult(messages=tuple(m for m in found if m is not None), duplicate=True)


def insert(tx: Tx, req: InsertRequest) -> InsertResult:
    if not tx.serialised:
        tx.lock(*lock_keys(req))
    if len(req.messages) == 1 and len(req.check_recipients) <= 1 and req.idempotency is None:
        return _insert_one(tx, req)  # the common send: its reads in one statement
    return _insert_many(tx, req)


def _insert_many(tx: Tx, req: InsertRequest) -> InsertResult:
    # The checks' reads go out first (pipelined, one round trip with the locks), read after.
    states = {n: tx.prefetch("agent_state", {"name": n}) for n in req.check_recipients}
    full = {}
    if req.unread_max > 0:
        for to in {m.to_agent for m in req.messages}:
            full[to] = tx.prefetch("unread_count_reaches", {"to": to, "cap": req.unread_max})
    earlier = _earlier(tx, req)
    if earlier is not None:
        return earlier
    for name, state in states.items():
        row = state()
        req.check_recipient(name, row["state"] if row else None)
    for to, reaches in full.items():
        if reaches() is not None:
            raise checks.inbox_full(to, req.unread_max)
    return _write_rows(tx, req)


def _insert_one(tx: Tx, req: InsertRequest) -> InsertResult:
    """``_insert_many`` of one message, at most one recipient checked, no idempotency key: the
    same checks in the same order, their three reads in one statement (``send_probe``)."""
    to = req.messages[0].to_agent
    digest, window_s = req.collapse if req.collapse is not None else (None, 0.0)
    checked = req.check_recipients[0] if req.check_recipients else None
    probe = {
        "digest": digest,
        "since": checks.window_start(req.now, window_s),
        "to": checked,
        "cap_to": to if req.unread_max > 0 else None,
        "cap": max(req.unread_max, 1),  # no cap: no :cap_to (a negative OFFSET is an error)
    }
    row = tx.fetch_one("send_probe", probe)
    assert row is not None  # three scalar subqueries: always one row
    if row["earlier_ids"] is not None:
        earlier = _collapse_into(tx, row["earlier_ids"])
        if earlier is not None:
            return earlier
    if checked is not None:
        req.check_recipient(checked, row["state"])
    if row["at_cap"] is not None:
        raise checks.inbox_full(to, req.unread_max)
    return _write_rows(tx, req)


def _earlier(tx: Tx, req: InsertRequest) -> InsertResult | None:
    """What an idempotent retry or a collapsed repeat returns instead of writing."""
    if req.idempotency is not None:
        # Checked again inside the write transaction: two racing sends write once.
        earlier = find_idempotent(tx, *req.idempotency)
        if earlier is not None and checks.replays(earlier.messages):
            return earlier
        if earlier is not None:  # every message it wrote was deleted since: the key is free
            tx.execute("idem_drop", {"sender": req.idempotency[0], "key": req.idempotency[1]})
    if req.collapse is None:
        return None
    digest, window_s = req.collapse
    since = checks.window_start(req.now, window_s)
    row = tx.fetch_one("recent_send_get", {"digest": digest, "since": since})
    return None if row is None else _collapse_into(tx, row["message_ids"])


def _collapse_into(tx: Tx, message_ids: Any) -> InsertResult | None:
    """The earlier send (``message_ids``, its JSON list) a repeat collapses into (counted as
    ``collapsed``), else None."""
    found = [get(tx, i) for i in tx.from_json(message_ids)]
    messages = tuple(m for m in found if m is not None)
    if not messages:
        return None  # purged meanwhile: nothing to point at, so this one is new
    tx.execute("counter_bump", {"name": "collapsed", "n": 1})
    return InsertResult(messages=messages, duplicate=True, collapsed=True)


def _write_rows(tx: Tx, req: InsertRequest) -> InsertResult:
    """The rest of an insert once its recipients passed: rate, thread guard, rows, loop guard."""
    if req.rate_limit_max > 0:
        _check_rate(tx, req)
    if req.thread_guard is not None and _trips_thread_guard(tx, req):
        tx.notify((req.thread_guard.escalation.to_agent,))
        return InsertResult(messages=(), held=True)
    if len(req.messages) == 1:
        tx.execute("insert_message", message_params(req.messages[0]))
    else:
        tx.execute_many("insert_message", [message_params(m) for m in req.messages])
    if req.collapse is not None:
        _remember(tx, req, *req.collapse)
    if not tx.serialised:
        tx.notify(m.to_agent for m in req.messages)
    if not (req.nudges or req.idempotency):
        return InsertResult(messages=req.messages)
    stamp = iso_now(req.now)
    for agent, message_id, reason in req.nudges:
        nudge = {"agent": agent, "message_id": message_id, "reason": reason, "stamp": stamp}
        tx.execute("nudge_put", nudge)
    if req.idempotency is not None:
        sender, key, digest = req.idempotency
        ids = tx.json([m.id for m in req.messages])
        params = {"sender": sender, "key": key, "digest": digest, "ids": ids, "stamp": stamp}
        tx.execute("idem_put", params)
    return InsertResult(messages=req.messages)


def _check_rate(tx: Tx, req: InsertRequest) -> None:
    since = checks.window_start(req.now, req.rate_limit_window_s)
    tx.execute("rate_trim", {"before": checks.rate_trim_before(req.now, req.rate_limit_window_s)})
    for m in req.messages:
        pair = {"from": m.from_agent, "to": m.to_agent}
        row = tx.fetch_one("rate_count", {**pair, "since": since})
        sent = int(row["n"]) if row is not None else 0
        refusal = checks.rate_limited(
            m.from_agent, m.to_agent, sent, req.rate_limit_max, req.rate_limit_window_s
        )
        if refusal is not None:
            raise refusal
        tx.execute("rate_insert", {**pair, "at": req.now})


def _trips_thread_guard(tx: Tx, req: InsertRequest) -> bool:
    """Count this send on its thread; True when it trips the cap (hold and escalation written).

    Raises ``LoopHeld`` when the thread is already held for the pair.
    """
    g = req.thread_guard
    assert g is not None
    key = {"thread": g.thread_id, "pair": g.pair}
    if tx.fetch_one("thread_hold_get", key) is not None:
        raise checks.held_error(g.thread_id, g.pair)
    since = checks.window_start(req.now, g.window_s)
    tx.execute("thread_log_trim", {**key, "since": since})
    row = tx.fetch_one("thread_log_count", {**key, "since": since})
    seen = int(row["n"]) if row is not None else 0
    if not checks.trips_thread_cap(seen, g.max_messages):
        tx.execute("thread_log_put", {**key, "at": req.now})
        return False
    stamp = iso_now(req.now)
    esc = g.escalation
    tx.execute("thread_hold_put", {**key, "messages": seen, "escalation": esc.id, "stamp": stamp})
    tx.execute("insert_message", message_params(esc))
    nudge = {"agent": esc.to_agent, "message_id": esc.id, "reason": "high escalation"}
    tx.execute("nudge_put", {**nudge, "stamp": stamp})
    return True


def _remember(tx: Tx, req: InsertRequest, digest: str, window_s: float) -> None:
    """Note this send's digest, so a repeat inside the window collapses into it.

    One insert per send; about one send in ``PRUNE_EVERY`` also deletes the rows that left the
    window (``recent_sends_prune``): every ``PRUNE_EVERY``-th row where rows are numbered
    (SQLite's rowid, whichever process wrote it), else drawn at random (senders share no
    counter). Expired rows left until then are harmless: the lookup only matches rows inside
    the window.
    """
    ids = tx.json([m.id for m in req.messages])
    n = tx.insert_row("recent_send_put", {"digest": digest, "ids": ids, "at": req.now})
    if (n % PRUNE_EVERY if n is not None else _draw()) == 0:
        tx.execute("recent_sends_prune", {"before": checks.window_start(req.now, window_s)})


def _draw() -> int:
    """A number in [0, PRUNE_EVERY): 0 about once in PRUNE_EVERY draws."""
    return os.urandom(1)[0] % PRUNE_EVERY


def send_one_params(req: InsertRequest) -> dict[str, Any] | None:
    """The one-statement send's arguments (``send_one``) for ``req``; None when it needs the
    general send (``insert``): an idempotency key, a rate limit, a thread guard, another
    registry's states, more than one message, recipient checked, or nudge."""
    if (
        len(req.messages) != 1
        or req.idempotency is not None
        or req.rate_limit_max > 0
        or req.thread_guard is not None
        or req.known_elsewhere
        or len(req.check_recipients) > 1
    ):
        return None
    locks = lock_names(lock_keys(req))
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
        if _draw() == 0:  # as ``_remember`` draws it where rows are not numbered
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
