"""Work queues, written once over the connector: membership, status, and the queue part of a
claim.

A member's claim (``queue_batch``, after its own redeliveries and direct mail) takes over the
oldest pending delivery of its queues, else one new queue message — in the queues where it is its
turn: queue work goes to the idle member served least recently (``_turns``, docs/queues.md),
and to any member once it has waited ``QUEUE_GRACE_S``. On SQLite the claim's
``BEGIN IMMEDIATE`` keeps every other member out between the look and the write; on PostgreSQL
both rows are taken ``FOR UPDATE SKIP LOCKED`` (the dialect's queries): two members claiming at
once never take one delivery or message twice, and neither waits for the other.
"""

from __future__ import annotations

from agentmaild.errors import NotFound
from agentmaild.ids import iso_now
from agentmaild.models import QUEUE_PREFIX, Batch, QueueInfo
from agentmaild.store.connector import OverConnector, Params, Tx
from agentmaild.store.rows import batch_of, message_from_row

QUEUE_GRACE_S = 2.0  # queue work waiting this long goes to any member that claims


def queue_batch(tx: Tx, agent: str, now: float, p: Params) -> tuple[Batch | None, float | None]:
    """Work from the agent's queues where it is its turn, claimed in ``tx`` (by
    ``claim.claim_in``, which has made sure the agent holds no live lease; ``p``: its
    parameters); and, when it left waiting work to members ahead of it, in how many seconds to
    claim again (the grace after which any member may take it)."""
    mine = {"agent": agent}
    if tx.fetch_one("queue_taker", mine) is None:
        return None, None
    turns, held_back = _turns(tx, agent, now)
    retry_s = QUEUE_GRACE_S if held_back else None
    if not turns:
        return None, retry_s
    queues = {"queues": tx.json(turns)}
    lease_until, stamp = p["lease_until"], p["stamp"]
    while (pending := tx.fetch_one("claim_pending_queue_delivery", queues)) is not None:
        of_it = {"id": pending["id"]}
        messages = [message_from_row(r) for r in tx.fetch_all("delivery_unread", of_it)]
        if not messages:  # all read another way meanwhile: nothing left to redeliver
            tx.execute("delivery_set_state", {"state": "acked", "stamp": stamp, **of_it})
            continue
        row = tx.fetch_one("delivery_take_over", {**mine, **of_it, "lease_until": lease_until,
                                                  "stamp": stamp})  # fmt: skip
        assert row is not None  # taken under the claim's lock above
        tx.execute("queue_served", {**mine, "queue": pending["queue"], "now": now})
        return batch_of(pending["id"], agent, messages, int(row["attempts"]), lease_until), None
    row = tx.fetch_one("claim_queue_candidate", queues)
    if row is None:
        return None, retry_s
    m = message_from_row(row)
    queue, delivery_id = m.to_agent[len(QUEUE_PREFIX) :], p["new_id"]
    born = {"id": delivery_id, "agent": agent, "lease_until": lease_until, "stamp": stamp}
    tx.execute("delivery_insert_queue", {**born, "queue": queue})
    tx.execute("message_set_delivery", {"delivery": delivery_id, "id": m.id})
    tx.execute("queue_served", {**mine, "queue": queue, "now": now})
    return batch_of(delivery_id, agent, [m], 1, lease_until), None


def _turns(tx: Tx, agent: str, now: float) -> tuple[list[str], bool]:
    """The agent's queues where it may take work now, and whether it left waiting work to others.

    In each queue, ``k`` idle members were served less recently than the agent (``queue_turns``):
    the first ``k`` items of waiting work are theirs, so the agent takes work only when more than
    ``k`` wait, or when some has waited past the grace (the member in turn is not claiming)."""
    since = iso_now(now - QUEUE_GRACE_S)
    mine: list[str] = []
    held_back = False
    for row in tx.fetch_all("queue_turns", {"agent": agent, "now": now}):
        queue, ahead = row["queue"], int(row["ahead"])
        waiting = 1 if ahead == 0 else _waiting(tx, queue, ahead + 1)
        if waiting > ahead or (
            waiting and tx.fetch_one("queue_stale", {"queue": queue, "since": since})
        ):
            mine.append(queue)
        elif waiting:
            held_back = True
    return mine, held_back


def _waiting(tx: Tx, queue: str, cap: int) -> int:
    row = tx.fetch_one("queue_waiting", {"queue": queue, "cap": cap})
    return int(row["n"]) if row is not None else 0


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
