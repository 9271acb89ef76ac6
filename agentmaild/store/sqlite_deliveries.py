"""The SQLite store's claim and ack, its tuned hot path (the rest of a delivery: ``deliveries``)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from agentmaild.ids import iso_now, new_id
from agentmaild.models import Attempt, Batch, Message
from agentmaild.store import pull
from agentmaild.store.history import insert_attempt
from agentmaild.store.queries import Q
from agentmaild.store.queues import queue_batch
from agentmaild.store.rows import message_from_row
from agentmaild.store.sqlite_tx import SqliteTransactions, SqliteTx


def _batch(
    delivery_id: str, agent: str, messages: list[Message], attempt: int, lease_until: float
) -> Batch:
    # Each message already names its delivery when it was read by it (a redelivery) or for it
    # (``_fresh_batch``): ``replace`` copies a frozen dataclass field by field (~16 µs a message).
    return Batch(
        delivery_id=delivery_id,
        agent=agent,
        messages=tuple(
            m if m.delivery_id == delivery_id else replace(m, delivery_id=delivery_id)
            for m in messages
        ),
        attempt=attempt,
        lease_until=lease_until,
    )


def _unread_of(conn: sqlite3.Connection, delivery_id: str) -> list[Message]:
    return [message_from_row(r) for r in conn.execute(Q["delivery_unread"], {"id": delivery_id})]


def _close_empty(conn: sqlite3.Connection, delivery_id: str, stamp: str) -> None:
    conn.execute(Q["delivery_set_state"], {"state": "acked", "stamp": stamp, "id": delivery_id})


def _reclaim_pending(
    conn: sqlite3.Connection, agent: str, lease_until: float, stamp: str
) -> Batch | None:
    """The agent's oldest pending redelivery, claimed again under its own id; else None."""
    mine = {"agent": agent}
    while (pending := conn.execute(Q["claim_pending_delivery"], mine).fetchone()) is not None:
        messages = _unread_of(conn, pending["id"])
        if not messages:
            # Everything in it was read another way (pull, hook): nothing left to redeliver.
            _close_empty(conn, pending["id"], stamp)
            continue
        claimed = {"lease_until": lease_until, "stamp": stamp, "id": pending["id"]}
        attempts = conn.execute(Q["delivery_mark_claimed"], claimed).fetchone()[0]
        return _batch(pending["id"], agent, messages, attempts, lease_until)
    return None


def _fresh_batch(
    conn: sqlite3.Connection, agent: str, max_messages: int, max_chars: int, delivery_id: str
) -> tuple[list[Message], bool]:
    """New mail in delivery order, cut before ``max_chars`` would be passed (at least one), and
    whether more of it is left (a full batch, or one cut short); each message as it will be
    once claimed by ``delivery_id``."""
    chosen: list[Message] = []
    used = 0
    rows = conn.execute(Q["claim_candidates"], {"agent": agent, "limit": max_messages}).fetchall()
    for row in rows:
        m = message_from_row(row, delivery_id=delivery_id)
        if chosen and used + m.size > max_chars:
            break
        chosen.append(m)
        used += m.size
    return chosen, len(rows) >= max_messages or len(chosen) < len(rows)


def _claim(
    conn: sqlite3.Connection,
    agent: str,
    max_messages: int,
    max_chars: int,
    lease_s: float,
    now: float,
) -> tuple[Batch | None, bool]:
    """The batch, and whether more may be claimable right after it (True unless known not)."""
    active, pending, in_queue = conn.execute(
        Q["claim_probe"], {"agent": agent, "now": now}
    ).fetchone()
    if active:
        return None, True
    lease_until = now + lease_s
    stamp = iso_now(now)
    if pending:
        redelivery = _reclaim_pending(conn, agent, lease_until, stamp)
        if redelivery is not None:
            return redelivery, True
    delivery_id = new_id("dlv")
    chosen, left = _fresh_batch(conn, agent, max_messages, max_chars, delivery_id)
    if not chosen:
        return queue_batch(SqliteTx(conn), agent, lease_until, stamp) if in_queue else None, True
    # Nothing left of its own and no queue to take work from: the loop need not claim again.
    more = left or bool(in_queue)
    born = {"id": delivery_id, "agent": agent, "lease_until": lease_until, "stamp": stamp}
    conn.execute(Q["delivery_insert"], born)
    # The id list varies in length, so this one statement is built here, not named in queries.sql.
    marks = ",".join("?" * len(chosen))
    conn.execute(
        f"UPDATE messages SET delivery_id = ? WHERE id IN ({marks})",
        (delivery_id, *(m.id for m in chosen)),
    )
    return _batch(delivery_id, agent, chosen, 1, lease_until), more


def _ack(
    conn: sqlite3.Connection, delivery_id: str, now: float, record: Attempt | None
) -> list[sqlite3.Row]:
    stamp = iso_now(now)
    marked = conn.execute(Q["delivery_ack_messages"], {"stamp": stamp, "by": delivery_id})
    rows = [r for r in marked if r["acked_by"] == delivery_id]  # not those read elsewhere
    for r in rows:
        conn.execute(Q["nudge_drop"], {"agent": r["to_agent"], "message_id": r["id"]})
    holder = conn.execute(Q["delivery_close"], {"stamp": stamp, "id": delivery_id}).fetchone()
    if record is not None:
        insert_attempt(SqliteTx(conn), record)
    if rows:
        # The holder, not the address: queue mail is addressed to the queue.
        pull.mark_reached(conn, holder[0] if holder is not None else rows[0]["to_agent"])
    return rows


_DRAINED_MAX = 1024


class SqliteDeliveries(SqliteTransactions):
    """The ``MailStore`` claim and ack on SQLite.

    ``drained``: ids of batches whose claim saw nothing else claimable for the agent (no more
    direct mail, no queue); the daemon's loop then waits for a wake-up instead of claiming again.
    """

    drained: set[str]

    def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        batch, more = self._write(
            lambda conn: _claim(conn, agent, max_messages, max_chars, lease_s, now)
        )
        if batch is not None and not more:
            self.after_commit(lambda: self._drained(batch.delivery_id))
        return batch

    def _drained(self, delivery_id: str) -> None:
        if len(self.drained) >= _DRAINED_MAX:  # claims nobody asked about (pull consumers)
            self.drained.clear()
        self.drained.add(delivery_id)  # AsyncMailStore.more_after() takes it out

    def ack_delivery(self, delivery_id: str, *, now: float, record: Attempt | None = None) -> int:
        rows = self._write(lambda conn: _ack(conn, delivery_id, now, record))
        link = self.overstory
        if link is not None:
            acked = [(r["to_agent"], r["id"]) for r in rows]
            self.after_commit(lambda: link.clear_acked(acked))
        return len(rows)
