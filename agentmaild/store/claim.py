"""The claim and the ack of a delivery, written once over the connector (``deliveries`` calls them).

A claim, in one write transaction holding the agent's lock (``Tx.lock``: PostgreSQL's advisory
lock; SQLite's single writer holds the whole file already): nothing while the agent holds a live
lease; else its oldest pending redelivery (same id, next attempt; pending deliveries whose mail was
all read another way are closed on the way); else new mail in delivery order, cut at
``max_messages`` and ``max_chars`` (at least one); else work from its queues (``queues``). Two
claimers for one agent run one after the other, so the second sees the first one's lease: a
message is never claimed twice. Its answer says too whether more may be claimable right after it
(the store's ``drained`` set keeps the batches that left nothing, so the daemon's loop waits for a
wake-up instead of claiming again).

The ack marks the batch's unread messages read by it (the ones another tool read meanwhile as read
elsewhere), drops their nudges, closes the delivery, writes the history row (never failing the
ack) and moves an agent still booting to working.

A dialect may offer either as one statement (``Connector.one_statement``: PostgreSQL's ``am_claim``
and ``am_ack``, ``sql/functions.sql``), same locks, same rows, same answer; ``claim_at_once`` and
``acked_at_once`` read those answers, for the sync store and the daemon's async one alike.

A delivery's open and close are ``midturn``'s (stdlib, so the hook claims mid-turn mail through
the very same statements: see ``midturn``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from agentmaild.ids import iso_now, new_id
from agentmaild.models import PRIORITY_RANK, Attempt, Batch, Message
from agentmaild.store.connector import Row, Tx
from agentmaild.store.history import attempt_params, insert_attempt, unrecorded
from agentmaild.store.midturn import close_delivery, open_delivery
from agentmaild.store.queues import queue_batch
from agentmaild.store.rows import batch_of, message_from_row

_NO_LIMIT = 2**31 - 1  # max_messages < 0: as many as there are
_HISTORY = ("record_id", "agent", "message_ids", "attempt", "outcome", "error", "duration_s", "at")


class Claimed(NamedTuple):
    """A claim's answer: the batch (None: nothing to claim now); whether more may be claimable
    right after it (True unless known not); when nothing was claimed because waiting queue work
    was left to members ahead in the queue's turn, in how many seconds to claim again."""

    batch: Batch | None
    more: bool = True
    retry_s: float | None = None


def claim_params(
    agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
) -> dict[str, Any]:
    """A claim's named parameters (the general claim's and ``claim_one``'s)."""
    return {
        "agent": agent,
        "now": now,
        "lease_until": now + lease_s,
        "stamp": iso_now(now),
        "max_messages": max_messages if max_messages >= 0 else _NO_LIMIT,
        "max_chars": max_chars,
        "new_id": new_id("dlv"),
    }


def claim_in(tx: Tx, p: dict[str, Any]) -> Claimed:
    """The claim of ``claim_params`` ``p`` inside ``tx``."""
    agent = p["agent"]
    tx.lock(f"agent:{agent}")
    probe = tx.fetch_one("claim_probe", {"agent": agent, "now": p["now"]})
    assert probe is not None  # three EXISTS: always one row
    if probe["active"]:
        return Claimed(None)
    if probe["pending"]:
        redelivery = _reclaim_pending(tx, agent, p["lease_until"], p["stamp"])
        if redelivery is not None:
            return Claimed(redelivery)
    chosen, left = _fresh_batch(tx, agent, p["max_messages"], p["max_chars"], p["new_id"])
    if not chosen:
        if not probe["in_queue"]:
            return Claimed(None)
        queued, retry_s = queue_batch(tx, agent, p["now"], p)
        return Claimed(queued, retry_s=retry_s)
    open_delivery(tx, p["new_id"], agent, [m.id for m in chosen], p["lease_until"], p["stamp"])
    batch = batch_of(p["new_id"], agent, chosen, 1, p["lease_until"])
    # Nothing left of its own and no queue to take work from: the loop need not claim again.
    return Claimed(batch, left or bool(probe["in_queue"]))


def _reclaim_pending(tx: Tx, agent: str, lease_until: float, stamp: str) -> Batch | None:
    """The agent's oldest pending redelivery, claimed again under its own id; else None."""
    mine = {"agent": agent}
    while (pending := tx.fetch_one("claim_pending_delivery", mine)) is not None:
        of_it = {"id": pending["id"]}
        messages = [message_from_row(r) for r in tx.fetch_all("delivery_unread", of_it)]
        if not messages:
            # Everything in it was read another way (pull, hook): nothing left to redeliver.
            tx.execute("delivery_set_state", {"state": "acked", "stamp": stamp, **of_it})
            continue
        claimed = {"lease_until": lease_until, "stamp": stamp, "id": pending["id"]}
        row = tx.fetch_one("delivery_mark_claimed", claimed)
        assert row is not None  # the row just read, under the claim's lock
        return batch_of(pending["id"], agent, messages, int(row["attempts"]), lease_until)
    return None


def _fresh_batch(
    tx: Tx, agent: str, max_messages: int, max_chars: int, delivery_id: str
) -> tuple[list[Message], bool]:
    """New mail in delivery order, cut before ``max_chars`` would be passed (at least one), and
    whether more of it is left (a full batch, or one cut short); each message as it will be
    once claimed by ``delivery_id``."""
    chosen: list[Message] = []
    used = 0
    rows = tx.fetch_all("claim_candidates", {"agent": agent, "limit": max_messages})
    for row in rows:
        m = message_from_row(row, delivery_id=delivery_id)
        if chosen and used + m.size > max_chars:
            break
        chosen.append(m)
        used += m.size
    return chosen, len(rows) >= max_messages or len(chosen) < len(rows)


def claim_at_once(agent: str, rows: Sequence[Row], lease_until: float) -> Claimed:
    """What ``claim_one`` answered: the batch (None: nothing to claim) and whether more may be
    claimable. Not for its queue marker (``needs_general``)."""
    if not rows:
        return Claimed(None)
    order = sorted((message_from_row(r) for r in rows), key=_order)
    first = rows[0]
    batch = batch_of(first["claim_id"], agent, order, int(first["claim_attempt"]), lease_until)
    return Claimed(batch, first["claim_more"] is not False)


def needs_general(rows: Sequence[Row]) -> bool:
    """``claim_one`` answered its marker: the agent's own mail gave nothing and it is a member of
    a work queue; the general claim (``claim_in``) must run."""
    return bool(rows) and rows[0]["claim_id"] is None


def _order(m: Message) -> tuple[int, str, str]:
    return (PRIORITY_RANK[m.priority], m.created_at, m.id)


def ack_in(tx: Tx, delivery_id: str, now: float, record: Attempt | None) -> list[Row]:
    """The ack inside ``tx``; the messages it marked read (``to_agent``, ``id``)."""
    rows, holder = close_delivery(tx, delivery_id, iso_now(now))
    if record is not None:
        insert_attempt(tx, record)
    if rows:
        # The holder, not the address: queue mail is addressed to the queue.
        agent = holder["agent"] if holder is not None else rows[0]["to_agent"]
        tx.execute("agent_reached", {"stamp": iso_now(), "agent": agent})
    return rows


def ack_params(delivery_id: str, now: float, record: Attempt | None) -> dict[str, object]:
    """The named parameters of ``ack_one`` (the history row's id list as JSON text)."""
    history: dict[str, object] = dict.fromkeys(_HISTORY)
    if record is not None:
        history = {**attempt_params(record, json.dumps), "record_id": record.delivery_id}
    history.pop("delivery_id", None)
    return {"id": delivery_id, "stamp": iso_now(now), "reached_stamp": iso_now(),
            "record": record is not None, **history}  # fmt: skip


def acked_at_once(row: Row, record: Attempt | None) -> int:
    """What ``ack_one`` answered: how many messages it marked read (a history row it could not
    write is logged)."""
    if row["unrecorded"] is not None and record is not None:
        unrecorded(record, row["unrecorded"])
    return int(row["acked"])
