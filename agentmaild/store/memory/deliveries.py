"""The delivery operations of the in-memory fake: claims, leases, acks, releases, dead letters."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from agentmaild.errors import NotFound
from agentmaild.ids import iso_now, new_id
from agentmaild.models import (
    QUEUE_PREFIX,
    REFUSED_STATES,
    AgentCounts,
    Attempt,
    Batch,
    DeadLetter,
    Message,
)
from agentmaild.store.memory.state import Delivery, MemoryState, atomic, chrono, order
from agentmaild.store.queues import QUEUE_GRACE_S
from agentmaild.store.records import Released, with_outcome


class MemoryDeliveries(MemoryState):
    """The ``MailStore`` delivery and lease operations over the fake's dicts."""

    def _members(self, delivery_id: str, *, unread: bool) -> list[Message]:
        found = (m for m in self._messages.values() if m.delivery_id == delivery_id)
        return sorted((m for m in found if not (unread and m.read)), key=order)

    @atomic
    def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        mine = [d for d in self._deliveries.values() if d.agent == agent]
        if any(d.state == "claimed" and (d.lease_until or 0.0) > now for d in mine):
            return None
        stamp = iso_now(now)
        own = [d for d in mine if d.queue is None]  # queue deliveries are claimed by queue
        redelivery = self._reclaim_pending(own, now + lease_s, stamp)
        if redelivery is not None:
            return redelivery
        chosen = self._fresh_batch(agent, max_messages, max_chars)
        if not chosen:
            return self._queue_batch(agent, now, now + lease_s, stamp)
        d = Delivery(id=new_id("dlv"), agent=agent, state="claimed", attempts=1)
        d.lease_until, d.created_at, d.updated_at = now + lease_s, stamp, stamp
        self._deliveries[d.id] = d
        batch = d.batch(chosen)
        self._messages.update((m.id, m) for m in batch.messages)
        return batch

    def _reclaim_pending(
        self, mine: list[Delivery], lease_until: float, stamp: str
    ) -> Batch | None:
        """The oldest pending redelivery of ``mine``, claimed again under its own id; else None."""
        for d in sorted(
            (d for d in mine if d.state == "pending"), key=lambda d: (d.created_at, d.id)
        ):
            messages = self._members(d.id, unread=True)
            d.updated_at = stamp
            if not messages:
                # Everything in it was read another way (pull, hook): nothing left to redeliver.
                d.state = "acked"
                continue
            d.state, d.attempts, d.lease_until = "claimed", d.attempts + 1, lease_until
            return d.batch(messages)
        return None

    def _idle(self, name: str, now: float) -> bool:
        a = self._agents.get(name)
        return (
            a is not None and a.state not in REFUSED_STATES and a.shutdown_requested_at is None
            and a.turn_state != "busy"
            and not any(d.agent == name and d.state == "claimed" and (d.lease_until or 0.0) > now
                        for d in self._deliveries.values())
        )  # fmt: skip

    def _turns(self, agent: str, now: float) -> tuple[set[str], bool]:
        """As ``queues._turns``: the agent's queues where it is its turn, and whether it left
        waiting work to idle members served less recently."""
        since, mine, held_back = iso_now(now - QUEUE_GRACE_S), set(), False
        for q, members in self._queue_members.items():
            if agent not in members:
                continue
            turn = (self._served.get((q, agent), -1.0), agent)
            ahead = sum(1 for r in members if r != agent and self._idle(r, now)
                        and (self._served.get((q, r), -1.0), r) < turn)  # fmt: skip
            waits = [m.created_at for m in self._messages.values()
                     if m.to_agent == QUEUE_PREFIX + q and not m.read and m.delivery_id is None]
            waits += [d.updated_at for d in self._deliveries.values()
                      if d.queue == q and d.state == "pending"]  # fmt: skip
            if len(waits) > ahead or any(w <= since for w in waits):
                mine.add(q)
            elif waits:
                held_back = True
        return mine, held_back

    def _queue_batch(
        self, agent: str, now: float, lease_until: float, stamp: str
    ) -> Batch | None:
        """Work from the agent's queues where it is its turn: a pending queue delivery taken
        over, else one message (``queues.queue_batch``)."""
        a = self._agents.get(agent)
        if a is None or a.state in REFUSED_STATES or a.shutdown_requested_at is not None:
            return None
        queues, held_back = self._turns(agent, now)
        batch = self._queue_take(agent, queues, lease_until, stamp)
        if batch is not None:
            self._served[(batch.messages[0].to_agent[len(QUEUE_PREFIX) :], agent)] = now
        elif held_back:
            self.deferred[agent] = QUEUE_GRACE_S
        return batch

    def _queue_take(
        self, agent: str, queues: set[str], lease_until: float, stamp: str
    ) -> Batch | None:
        pending = [
            d for d in self._deliveries.values() if d.state == "pending" and d.queue in queues
        ]
        for d in sorted(pending, key=lambda d: (d.created_at, d.id)):
            messages = self._members(d.id, unread=True)
            d.updated_at = stamp
            if not messages:
                d.state = "acked"
                continue
            d.state, d.agent, d.attempts, d.lease_until = (
                "claimed",
                agent,
                d.attempts + 1,
                lease_until,
            )
            return d.batch(messages)
        boxes = {QUEUE_PREFIX + q for q in queues}
        fresh = [m for m in self._messages.values() if m.to_agent in boxes and not m.read]
        waiting = sorted((m for m in fresh if m.delivery_id is None), key=order)
        if not waiting:
            return None
        queue = waiting[0].to_agent[len(QUEUE_PREFIX) :]
        d = Delivery(id=new_id("dlv"), agent=agent, state="claimed", attempts=1, queue=queue)
        d.lease_until, d.created_at, d.updated_at = lease_until, stamp, stamp
        self._deliveries[d.id] = d
        batch = d.batch(waiting[:1])
        self._messages.update((m.id, m) for m in batch.messages)
        return batch

    def _fresh_batch(self, agent: str, max_messages: int, max_chars: int) -> list[Message]:
        """New mail in delivery order, cut before ``max_chars`` would be passed (at least one)."""
        fresh = sorted((m for m in self._unread(agent) if m.delivery_id is None), key=order)
        chosen: list[Message] = []
        for m in fresh if max_messages < 0 else fresh[:max_messages]:  # LIMIT -1: no limit
            if chosen and sum(c.size for c in chosen) + m.size > max_chars:
                break
            chosen.append(m)
        return chosen

    @atomic
    def ack_delivery(self, delivery_id: str, *, now: float, record: Attempt | None = None) -> int:
        for m in self._members(delivery_id, unread=False):
            if m.read and m.acked_by is None:  # marked read by another tool meanwhile
                self._messages[m.id] = replace(m, acked_by="elsewhere", acked_at=iso_now(now))
        members = self._members(delivery_id, unread=True)
        done = self._mark_read((m.id for m in members), delivery_id, now)
        d = self._deliveries.get(delivery_id)
        if d is not None and d.state == "claimed":
            d.state, d.failures, d.lease_until, d.updated_at = "acked", 0, None, iso_now(now)
        if record is not None:
            self._append_attempt(record)
        if d is not None and done:
            self._mark_reached(d.agent)
        return len(done)

    @atomic
    def release(
        self,
        delivery_id: str,
        *,
        error: str,
        max_attempts: int,
        now: float,
        count: int = 1,
        record: Attempt | None = None,
    ) -> Released:
        d = self._deliveries.get(delivery_id)
        if d is None or d.state != "claimed":
            raise NotFound(f"no claimed delivery {delivery_id}")
        d.failures += count
        d.state = "dead" if d.failures >= max_attempts else "pending"
        d.lease_until, d.last_error, d.updated_at = None, error[:2000], iso_now(now)
        dead = self._members(delivery_id, unread=True) if d.state == "dead" else []
        record = with_outcome(record, d.state)
        if record is not None:
            self._append_attempt(record)
        return Released(state=d.state, failures=d.failures, messages=tuple(dead))

    @atomic
    def attach_to_delivery(self, message_id: str, delivery_id: str, agent: str) -> bool:
        m, d = self._messages.get(message_id), self._deliveries.get(delivery_id)
        if m is None or m.read or m.delivery_id or m.to_agent != agent or d is None:
            return False
        if d.agent != agent or d.state != "claimed":
            return False
        self._messages[message_id] = replace(m, delivery_id=delivery_id)
        return True

    @atomic
    def extend_lease(self, delivery_id: str, *, lease_s: float, now: float) -> bool:
        d = self._deliveries.get(delivery_id)
        if d is None or d.state != "claimed":
            return False
        d.lease_until = now + lease_s
        return True

    @atomic
    def reap_expired(
        self,
        *,
        now: float,
        everything: bool = False,
        host: str | None = None,
        agent: str | None = None,
    ) -> list[tuple[str, str]]:
        reaped = []
        for d in self._deliveries.values():
            if agent is not None and d.agent != agent:
                continue
            expired = d.lease_until is not None and d.lease_until <= now
            holder = self._agents.get(d.agent)
            ours = host is None or (holder is not None and holder.host in (None, host))
            if d.state == "claimed" and (expired or (everything and ours)):
                d.state, d.lease_until, d.updated_at = "pending", None, iso_now(now)
                reaped.append((d.id, d.agent))
        return sorted(reaped)

    @atomic
    def dead_letters(self, agent: str | None = None) -> list[DeadLetter]:
        live = {m.delivery_id for m in self._messages.values()}
        dead = [d for d in self._deliveries.values() if d.state == "dead" and d.id in live]
        return [
            self._dead_letter(d)
            for d in sorted(dead, key=lambda d: (d.updated_at, d.id))
            if not agent or d.agent == agent
        ]

    def _dead_letter(self, d: Delivery) -> DeadLetter:
        members = sorted(self._members(d.id, unread=False), key=chrono)
        return DeadLetter(
            delivery_id=d.id,
            agent=d.agent,
            message_ids=tuple(m.id for m in members),
            attempts=d.attempts,
            last_error=d.last_error,
            dead_at=d.updated_at,
        )

    @atomic
    def retry_dead(self, *, agent: str | None = None, delivery_id: str | None = None) -> list[str]:
        chosen = [
            d
            for d in self._deliveries.values()
            if d.state == "dead" and agent in (None, d.agent) and delivery_id in (None, d.id)
        ]
        for d in chosen:
            d.state, d.failures, d.updated_at = "pending", 0, iso_now()
        return [d.id for d in chosen]

    @atomic
    def pending_agents(self) -> set[str]:
        unread = (m for m in self._messages.values() if not m.read)
        due = {m.to_agent for m in unread if m.delivery_id is None or self._in_state(m, "pending")}
        for queue, members in self._queue_members.items():
            if QUEUE_PREFIX + queue in due:
                due |= members
        return due

    @atomic
    def counts(self) -> dict[str, AgentCounts]:
        unread = Counter(m.to_agent for m in self._messages.values() if not m.read)
        live = {m.delivery_id for m in self._messages.values()}
        states = Counter(
            (d.agent, d.state)
            for d in self._deliveries.values()
            if d.state == "claimed" or d.id in live
        )
        agents = set(unread) | {a for a, s in states if s in ("claimed", "dead")}
        return {
            a: AgentCounts(
                agent=a,
                unread=unread[a],
                in_flight=states[(a, "claimed")],
                dead_letters=states[(a, "dead")],
            )
            for a in agents
        }

    @atomic
    def totals(self) -> dict[str, int]:
        unread = sum(1 for m in self._messages.values() if not m.read)
        return {"messages": len(self._messages), "unread": unread}
