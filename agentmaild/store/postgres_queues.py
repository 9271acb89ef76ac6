"""Work queues on PostgreSQL: membership, status, and the queue part of a claim.

A member's claim (``queue_batch``, after its own redeliveries and direct mail) takes over the
oldest pending delivery of its queues, else one new queue message. Both rows are taken ``FOR
UPDATE SKIP LOCKED``: two members claiming at once never take one delivery or message twice,
and neither waits for the other.
"""

from __future__ import annotations

from dataclasses import replace

from agentmaild.errors import NotFound
from agentmaild.ids import new_id
from agentmaild.models import QUEUE_PREFIX, Batch, Message, QueueInfo
from agentmaild.store.postgres_tx import PQ, Conn, PostgresTransactions, one
from agentmaild.store.rows import message_from_row


def _batch(
    delivery_id: str, agent: str, messages: list[Message], attempt: int, lease_until: float
) -> Batch:
    return Batch(
        delivery_id=delivery_id,
        agent=agent,
        messages=tuple(replace(m, delivery_id=delivery_id) for m in messages),
        attempt=attempt,
        lease_until=lease_until,
    )


def _unread_of(conn: Conn, delivery_id: str) -> list[Message]:
    rows = conn.execute(PQ["delivery_unread"], {"id": delivery_id}).fetchall()
    return [message_from_row(r) for r in rows]


def queue_batch(conn: Conn, agent: str, now: float, lease_until: float, stamp: str) -> Batch | None:
    """Work from the agent's queues (it holds no live lease and has no mail of its own)."""
    if one(conn, PQ["claim_active"], {"agent": agent, "now": now}) is not None:
        return None
    if one(conn, PQ["queue_taker"], {"agent": agent}) is None:
        return None
    while (pending := one(conn, PQ["claim_pending_queue_delivery"], {"agent": agent})) is not None:
        messages = _unread_of(conn, pending["id"])
        if not messages:  # all read another way meanwhile: nothing left to redeliver
            conn.execute(
                PQ["delivery_set_state"], {"state": "acked", "stamp": stamp, "id": pending["id"]}
            )
            continue
        take = {"agent": agent, "lease_until": lease_until, "stamp": stamp, "id": pending["id"]}
        row = one(conn, PQ["delivery_take_over"], take)
        assert row is not None  # locked above
        return _batch(pending["id"], agent, messages, int(row["attempts"]), lease_until)
    row = one(conn, PQ["claim_queue_candidate"], {"agent": agent})
    if row is None:
        return None
    m = message_from_row(row)
    delivery_id = new_id("dlv")
    born = {
        "id": delivery_id,
        "agent": agent,
        "lease_until": lease_until,
        "stamp": stamp,
        "queue": m.to_agent[len(QUEUE_PREFIX) :],
    }
    conn.execute(PQ["delivery_insert_queue"], born)
    conn.execute(PQ["message_set_delivery"], {"delivery": delivery_id, "id": m.id})
    return _batch(delivery_id, agent, [m], 1, lease_until)



class PostgresQueues(PostgresTransactions):
    """The ``MailStore`` work-queue operations on PostgreSQL."""

    def join_queue(self, queue: str, agent: str) -> None:
        def run(conn: Conn) -> None:
            if one(conn, PQ["agent_get"], {"name": agent}) is None:
                raise NotFound(f"no agent named {agent!r}")
            conn.execute(PQ["queue_join"], {"queue": queue, "agent": agent})

        self._write(run)

    def leave_queue(self, queue: str, agent: str) -> bool:
        params = {"queue": queue, "agent": agent}
        return self._write(lambda conn: conn.execute(PQ["queue_leave"], params).rowcount == 1)

    def queue_members(self, queue: str) -> list[str]:
        return [str(r["agent"]) for r in self._read(PQ["queue_members"], {"queue": queue})]

    def queues(self) -> list[QueueInfo]:
        def run(conn: Conn) -> list[QueueInfo]:
            members: dict[str, list[str]] = {}
            for r in conn.execute(PQ["queue_members_all"]):
                members.setdefault(r["queue"], []).append(r["agent"])
            depths = {r["queue"]: int(r["n"]) for r in conn.execute(PQ["queue_depths"])}
            held: dict[str, list[tuple[str, str, int]]] = {}
            for r in conn.execute(PQ["queue_held"]):
                held.setdefault(r["queue"], []).append((r["agent"], r["id"], int(r["attempts"])))
            return [
                QueueInfo(
                    name=name,
                    members=tuple(members.get(name, ())),
                    depth=depths.get(name, 0),
                    held=tuple(held.get(name, ())),
                )
                for name in sorted(set(members) | set(depths) | set(held))
            ]

        return self._read_with(run)
