"""The PostgreSQL store's claim and ack, its tuned hot path (the rest: ``deliveries``).

A claim is ``am_claim`` (``sql/functions.sql``): a transaction-scoped advisory lock on the agent,
then one claim statement (rows taken ``FOR UPDATE SKIP LOCKED``): two daemons (or a daemon and the
agent's own ``check``) taking mail for one agent at once run one after the other, so the second sees
the first one's lease and takes nothing, as with SQLite's single writer. It is one statement in its
own transaction (one round trip, no BEGIN/COMMIT). With no redelivery and no direct mail for a queue
member it answers a marker, and ``claim_in`` takes queue work (``queues.queue_batch``)
under the same lock. The ack is ``am_ack``, one statement too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentmaild.ids import iso_now, new_id
from agentmaild.models import PRIORITY_RANK, Attempt, Batch, Message
from agentmaild.store.history import unrecorded
from agentmaild.store.postgres_history import ack_params
from agentmaild.store.postgres_tx import PQ, Conn, PgTx, PostgresTransactions, Row, lock
from agentmaild.store.queues import queue_batch
from agentmaild.store.rows import message_from_row


def _order(m: Message) -> tuple[int, str, str]:
    return (PRIORITY_RANK[m.priority], m.created_at, m.id)


def claim_in(
    conn: Conn, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
) -> Batch | None:
    """The claim inside the caller's transaction (exposed for the race tests and benchmarks):
    ``am_claim``, then the agent's queues when it answers the queue marker (claim_id NULL)."""
    lock(conn, f"agent:{agent}")  # am_claim takes it again: advisory locks are re-entrant
    params = claim_params(agent, max_messages=max_messages, lease_s=lease_s, now=now,
                           max_chars=max_chars)
    rows = conn.execute(PQ["claim_one"], params).fetchall()
    if not rows:
        return None
    if rows[0]["claim_id"] is None:
        return queue_batch(PgTx(conn), agent, params["lease_until"], params["stamp"], now=now)
    return claimed(agent, rows, params["lease_until"])


def claim_params(
    agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
) -> dict[str, Any]:
    return {
        "agent": agent,
        "now": now,
        "lease_until": now + lease_s,
        "stamp": iso_now(now),
        "max_messages": None if max_messages < 0 else max_messages,  # LIMIT NULL: no limit
        "max_chars": max_chars,
        "new_id": new_id("dlv"),
    }


def claimed(agent: str, rows: list[Row], lease_until: float) -> Batch:
    delivery_id = rows[0]["claim_id"]
    messages = sorted((message_from_row(r) for r in rows), key=_order)
    return Batch(
        delivery_id=delivery_id,
        agent=agent,
        messages=tuple(replace(m, delivery_id=delivery_id) for m in messages),
        attempt=int(rows[0]["claim_attempt"]),
        lease_until=lease_until,
    )


def _ack(conn: Conn, delivery_id: str, now: float, record: Attempt | None) -> int:
    """The ack as one statement (``am_ack``; see ``sql/functions.sql``)."""
    params = ack_params(delivery_id, now, record)
    row = conn.kept_cursor().execute(PQ["ack_one"], params).fetchone()
    assert row is not None  # am_ack always answers one row
    return settled(row, record)


def settled(row: Row, record: Attempt | None) -> int:
    """What ``am_ack``'s row says: how many messages it marked read (a history row it could not
    write is logged)."""
    if row["unrecorded"] is not None and record is not None:
        unrecorded(record, row["unrecorded"])
    return int(row["acked"])


_DRAINED_MAX = 1024


class PostgresDeliveries(PostgresTransactions):
    """The ``MailStore`` claim and ack on PostgreSQL.

    ``drained``: ids of batches whose claim saw nothing else claimable for the agent (``am_claim``
    answered ``claim_more`` false), as SQLite's store keeps them; the daemon's loop then waits for
    a wake-up instead of claiming again (``AsyncMailStore.more_after`` takes them out).
    """

    drained: set[str]

    def note_claimed(self, batch: Batch, rows: list[Row]) -> Batch:
        """``batch``, its id kept in ``drained`` when its claim said nothing more is left."""
        if rows[0].get("claim_more") is False:
            if len(self.drained) >= _DRAINED_MAX:  # claims nobody asked about (pull consumers)
                self.drained.clear()
            self.drained.add(batch.delivery_id)
        return batch

    def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        """One call of ``am_claim`` (the lock and the claim, its own transaction);
        the general claim (``claim_in``) only when the agent's queues must be looked at."""
        params = claim_params(agent, max_messages=max_messages, max_chars=max_chars,
                               lease_s=lease_s, now=now)
        rows = self._write(
            lambda conn: conn.kept_cursor().execute(PQ["claim_one"], params).fetchall(),
            single=True,
        )
        if not rows:
            return None
        if rows[0]["claim_id"] is not None:
            return self.note_claimed(claimed(agent, rows, params["lease_until"]), rows)
        return self.claim_with_queues(
            agent, max_messages=max_messages, max_chars=max_chars, lease_s=lease_s, now=now
        )

    def claim_with_queues(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        """The general claim (``claim_in``), for an agent whose own mail gave nothing and who is
        a member of a work queue."""
        return self._write(
            lambda conn: claim_in(
                conn, agent, max_messages=max_messages, max_chars=max_chars,
                lease_s=lease_s, now=now,
            ),
            pipeline=True,  # BEGIN, the agent's lock and the claim: one round trip, then COMMIT
        )

    def ack_delivery(self, delivery_id: str, *, now: float, record: Attempt | None = None) -> int:
        return self._write(lambda conn: _ack(conn, delivery_id, now, record), single=True)
