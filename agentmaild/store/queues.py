"""Work queues, written once over the connector: membership, status, and the queue part of a
claim.

A member's claim (``queue_batch``, after its own redeliveries and direct mail) takes over the
oldest pending delivery of its queues, else one new queue message. On SQLite the claim's
``BEGIN IMMEDIATE`` keeps every other member out between the look and the write; on PostgreSQL
both rows are taken ``FOR UPDATE SKIP LOCKED`` (the dialect's queries): two members claiming at
once never take one delivery or message twice, and neither waits for the other.
"""

from __future__ import annotations

from agentmaild.errors import NotFound
from agentmaild.ids import new_id
from agentmaild.models import QUEUE_PREFIX, Batch, Message, QueueInfo
from agentmaild.store.connector import OverConnector, Tx
from agentmaild.store.rows import batch_of, message_from_row


def _unread_of(tx: Tx, delivery_id: str) -> list[Message]:
    return [message_from_row(r) for r in tx.fetch_all("delivery_unread", {"id": delivery_id})]


def queue_batch(tx: Tx, agent: str, lease_until: float, stamp: str) -> Batch | None:
    """Work from the agent's queues, claimed in ``tx`` (by ``claim.claim_in``, which has made sure
    the agent holds no live lease)."""
    mine = {"agent": agent}
    if tx.fetch_one("queue_taker", mine) is None:
        return None
    while (pending := tx.fetch_one("claim_pending_queue_delivery", mine)) is not None:
        messages = _unread_of(tx, pending["id"])
        if not messages:  # all read another way meanwhile: nothing left to redeliver
            closed = {"state": "acked", "stamp": stamp, "id": pending["id"]}
            tx.execute("delivery_set_state", closed)
            continue
        take = {**mine, "lease_until": lease_until, "stamp": stamp, "id": pending["id"]}
        row = tx.fetch_one("delivery_take_over", take)
        assert row is not None  # taken under the claim's lock above
        return batch_of(pending["id"], agent, messages, int(row["attempts"]), lease_until)
    row = tx.fetch_one("claim_queue_candidate", mine)
    if row is None:
        return None
    m = message_from_row(row)
    delivery_id = new_id("dlv")
    born = {"id": delivery_id, "agent": agent, "lease_until": lease_until, "stamp": stamp}
    tx.execute("delivery_insert_queue", {**born, "queue": m.to_agent[len(QUEUE_PREFIX) :]})
    tx.execute("message_set_delivery", {"delivery": delivery_id, "id": m.id})
    return batch_of(delivery_id, agent, [m], 1, lease_until)


class StoreQueues(OverConnector):
    """The ``MailStore`` work-queue operations, for every SQL store."""

    def join_queue(self, queue: str, agent: str) -> None:
        def run(tx: Tx) -> None:
            if tx.fetch_one("agent_get", {"name": agent}) is None:
                raise NotFound(f"no agent named {agent!r}")
            tx.execute("queue_join", {"queue": queue, "agent": agent})

        self.db.write(run)

    def leave_queue(self, queue: str, agent: str) -> bool:
        params = {"queue": queue, "agent": agent}
        return self.db.write(lambda tx: tx.execute("queue_leave", params)) == 1

    def queue_members(self, queue: str) -> list[str]:
        return [str(r["agent"]) for r in self.db.fetch_all("queue_members", {"queue": queue})]

    def queues(self) -> list[QueueInfo]:
        return self.db.read(_queues)


def _queues(tx: Tx) -> list[QueueInfo]:
    members: dict[str, list[str]] = {}
    for r in tx.fetch_all("queue_members_all"):
        members.setdefault(r["queue"], []).append(r["agent"])
    depths = {r["queue"]: int(r["n"]) for r in tx.fetch_all("queue_depths")}
    held: dict[str, list[tuple[str, str, int]]] = {}
    for r in tx.fetch_all("queue_held"):
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
