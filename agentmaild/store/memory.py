"""MemoryMailStore: an in-memory MailStore that behaves like SqliteMailStore, for tests."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Concatenate, ParamSpec, TypeVar

from agentmaild.errors import Conflict, InboxFull, NotFound, RateLimited, StateError, StoreError
from agentmaild.ids import iso_now, new_id
from agentmaild.models import (
    PRIORITY_RANK,
    STATE_TRANSITIONS,
    Agent,
    AgentCounts,
    Batch,
    DeadLetter,
    Message,
)
from agentmaild.store.base import (
    AGENT_MUTABLE_FIELDS,
    InsertRequest,
    InsertResult,
    MailStore,
    Released,
)

P = ParamSpec("P")
R = TypeVar("R")
_RateLog = list[tuple[str, str, float]]


def _atomic(
    method: Callable[Concatenate[MemoryMailStore, P], R],
) -> Callable[Concatenate[MemoryMailStore, P], R]:
    """One call, one lock hold: the fake's stand-in for one SQL transaction."""

    @functools.wraps(method)
    def locked(self: MemoryMailStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


def _order(m: Message) -> tuple[int, str, str]:
    """Delivery order: priority (unknown ranks last, like the SQL CASE), then created_at, id."""
    return (PRIORITY_RANK.get(m.priority, 3), m.created_at, m.id)


def _chrono(m: Message) -> tuple[str, str]:
    return (m.created_at, m.id)


@dataclass(slots=True, kw_only=True)
class _Delivery:
    id: str
    agent: str
    state: str  # claimed | pending | acked | dead
    attempts: int
    failures: int = 0
    lease_until: float | None = None
    last_error: str | None = None
    created_at: str = ""
    updated_at: str = ""

    def batch(self, messages: Iterable[Message]) -> Batch:
        return Batch(
            delivery_id=self.id,
            agent=self.agent,
            messages=tuple(replace(m, delivery_id=self.id) for m in messages),
            attempt=self.attempts,
            lease_until=self.lease_until or 0.0,
        )


class MemoryMailStore(MailStore):
    """Dicts behind one lock; every public method is one atomic step, as one SQL transaction is."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._messages: dict[str, Message] = {}
        self._agents: dict[str, Agent] = {}
        self._deliveries: dict[str, _Delivery] = {}
        self._nudges: dict[tuple[str, str], tuple[str, str]] = {}  # (agent, id) -> (reason, at)
        self._rate_log: _RateLog = []
        self._idempotency: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}

    # -- messages ---------------------------------------------------------------------------
    @_atomic
    def find_idempotent(self, sender: str, key: str, digest: str) -> InsertResult | None:
        seen = self._idempotency.get((sender, key))
        if seen is None:
            return None
        if seen[0] != digest:
            raise Conflict(
                f"idempotency key {key!r} was already used by {sender} for other content"
            )
        found = (self._messages.get(i) for i in seen[1])
        return InsertResult(messages=tuple(m for m in found if m is not None), duplicate=True)

    @_atomic
    def insert(self, request: InsertRequest) -> InsertResult:
        if request.idempotency is not None:
            earlier = self.find_idempotent(*request.idempotency)
            if earlier is not None:
                return earlier
        # Checks first, writes after: a refused insert leaves nothing behind (a rollback).
        self._check_unread_cap(request)
        rate_log = self._check_rate(request)
        self._write_insert(request, rate_log)
        return InsertResult(messages=request.messages)

    def _check_unread_cap(self, req: InsertRequest) -> None:
        for to in {m.to_agent for m in req.messages} if req.unread_max > 0 else ():
            if sum(1 for _ in self._unread(to)) >= req.unread_max:
                raise InboxFull(
                    f"inbox of {to} is full ({req.unread_max} unread); retry once it reads its mail"
                )

    def _check_rate(self, req: InsertRequest) -> _RateLog:
        if req.rate_limit_max <= 0:
            return self._rate_log
        since = req.now - req.rate_limit_window_s
        # Trimmed as the SQL store trims, so reset_rate_limit counts the same rows.
        log = [e for e in self._rate_log if e[2] > since - req.rate_limit_window_s]
        for m in req.messages:
            pair = (m.from_agent, m.to_agent)
            sent = sum(1 for f, t, at in log if (f, t) == pair and at > since)
            if sent >= req.rate_limit_max:
                raise RateLimited(
                    f"rate limit: {m.from_agent}→{m.to_agent} sent {sent} messages in the "
                    f"last {req.rate_limit_window_s:g}s (max {req.rate_limit_max})"
                )
            log.append((*pair, req.now))
        return log

    def _write_insert(self, req: InsertRequest, rate_log: _RateLog) -> None:
        clash = [m.id for m in req.messages if m.id in self._messages]
        if clash or len({m.id for m in req.messages}) != len(req.messages):
            raise StoreError(f"store write failed: duplicate message id {clash}")
        self._messages.update(
            (m.id, replace(m, read=False, delivery_id=None)) for m in req.messages
        )
        for agent, message_id, reason in req.nudges:
            self._nudges.setdefault((agent, message_id), (reason, iso_now(req.now)))
        if req.idempotency is not None:
            sender, key, digest = req.idempotency
            self._idempotency[(sender, key)] = (digest, tuple(m.id for m in req.messages))
        self._rate_log = rate_log

    def _unread(self, agent: str) -> Iterable[Message]:
        return (m for m in self._messages.values() if m.to_agent == agent and not m.read)

    @_atomic
    def get_message(self, message_id: str) -> Message | None:
        return self._messages.get(message_id)

    @_atomic
    def inbox(self, agent: str, *, unread_only: bool = False) -> list[Message]:
        mine = (m for m in self._messages.values() if m.to_agent == agent)
        return sorted((m for m in mine if not (unread_only and m.read)), key=_chrono)

    @_atomic
    def take_unread(self, agent: str, *, max_chars: int = 0, ack: bool = True) -> list[Message]:
        taken: list[Message] = []
        for m in sorted(self._unread(agent), key=_order):
            if self._in_state(m, "claimed"):
                continue  # in flight to the daemon: the pull side must not take it too
            if max_chars and taken and sum(t.size for t in taken) + m.size > max_chars:
                break
            taken.append(m)
        if ack:
            self._mark_read(m.id for m in taken)
        return taken

    def _in_state(self, m: Message, *states: str) -> bool:
        d = self._deliveries.get(m.delivery_id) if m.delivery_id else None
        return d is not None and d.state in states

    def _mark_read(self, ids: Iterable[str]) -> list[str]:
        done: list[str] = []
        for i in ids:
            m = self._messages.get(i)
            if m is not None and not m.read:
                self._messages[i] = replace(m, read=True)
                self._nudges.pop((m.to_agent, i), None)
                done.append(i)
        return done

    @_atomic
    def ack(self, message_ids: Sequence[str], *, by: str = "pull") -> list[str]:
        return self._mark_read(message_ids)

    @_atomic
    def list_messages(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        type: str | None = None,
        unread: bool | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        def keep(m: Message) -> bool:
            return (
                from_agent in (None, m.from_agent)
                and to_agent in (None, m.to_agent)
                and type in (None, m.type)
                and unread in (None, not m.read)
            )

        found = sorted(filter(keep, self._messages.values()), key=_chrono, reverse=True)
        return found if limit is None or limit < 0 else found[:limit]  # LIMIT -1: no limit

    @_atomic
    def thread(self, thread_id: str) -> list[Message]:
        found = (m for m in self._messages.values() if thread_id in (m.thread_id, m.id))
        return sorted(found, key=_chrono)

    @_atomic
    def purge(
        self, *, older_than: str | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        if older_than is None and agent is None and not everything:
            return 0
        gone = [
            m
            for m in self._messages.values()
            if (older_than is None or m.created_at < older_than)
            and agent in (None, m.from_agent, m.to_agent)
        ]
        for m in gone:
            del self._messages[m.id]
            self._nudges.pop((m.to_agent, m.id), None)
        # Deliveries left with no message at all are history nobody can act on.
        live = {m.delivery_id for m in self._messages.values()}
        for d in [d for d in self._deliveries.values() if d.state != "claimed"]:
            if d.id not in live:
                del self._deliveries[d.id]
        return len(gone)

    @_atomic
    def reset_rate_limit(self, from_agent: str, to_agent: str) -> int:
        kept = [e for e in self._rate_log if e[:2] != (from_agent, to_agent)]
        n, self._rate_log = len(self._rate_log) - len(kept), kept
        return n

    @_atomic
    def take_nudges(self, agent: str) -> list[dict[str, Any]]:
        mine = sorted((at, i, why) for (a, i), (why, at) in self._nudges.items() if a == agent)
        out = []
        for _, i, why in mine:
            del self._nudges[(agent, i)]
            m = self._messages.get(i)
            if m is not None and not m.read:
                about = {"subject": m.subject, "priority": m.priority, "type": m.type}
                out.append({"message_id": i, "reason": why, **about, "from_agent": m.from_agent})
        return out

    # -- agents -----------------------------------------------------------------------------
    @_atomic
    def add_agent(self, agent: Agent) -> Agent:
        if agent.name in self._agents:
            raise Conflict(f"agent {agent.name!r} already exists")
        stamp = iso_now()
        self._agents[agent.name] = stored = replace(agent, created_at=stamp, updated_at=stamp)
        return stored

    @_atomic
    def get_agent(self, name: str) -> Agent | None:
        return self._agents.get(name)

    @_atomic
    def list_agents(self) -> list[Agent]:
        return [self._agents[n] for n in sorted(self._agents)]

    @_atomic
    def _change_agent(self, name: str, change: Callable[[Agent], Agent]) -> Agent:
        current = self._agents.get(name)
        if current is None:
            raise NotFound(f"no agent named {name!r}")
        self._agents[name] = agent = change(current)
        return agent

    def update_agent(self, name: str, changes: dict[str, Any]) -> Agent:
        bad = set(changes) - AGENT_MUTABLE_FIELDS
        if bad:
            raise StoreError(f"cannot change agent field(s): {', '.join(sorted(bad))}")
        fields = dict(changes)
        if fields.get("command") is not None:
            fields["command"] = tuple(fields["command"])
        fields["updated_at"] = stamp = iso_now()
        if "turn_state" in changes:
            fields["turn_state_at"] = stamp
        return self._change_agent(name, lambda a: replace(a, **fields))

    def set_agent_state(self, name: str, state: str, *, force: bool = False) -> Agent:
        def change(a: Agent) -> Agent:
            if state not in STATE_TRANSITIONS:
                raise StateError(f"unknown state {state!r}")
            if not force and a.state != state and state not in STATE_TRANSITIONS[a.state]:
                allowed = ", ".join(sorted(STATE_TRANSITIONS[a.state]))
                raise StateError(
                    f"agent {name}: cannot go from {a.state} to {state} (allowed: {allowed})"
                )
            return replace(a, state=state, updated_at=iso_now())

        return self._change_agent(name, change)

    @_atomic
    def remove_agent(self, name: str) -> None:
        if self._agents.pop(name, None) is None:
            raise NotFound(f"no agent named {name!r}")

    # -- deliveries -------------------------------------------------------------------------
    def _members(self, delivery_id: str, *, unread: bool) -> list[Message]:
        found = (m for m in self._messages.values() if m.delivery_id == delivery_id)
        return sorted((m for m in found if not (unread and m.read)), key=_order)

    @_atomic
    def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        mine = [d for d in self._deliveries.values() if d.agent == agent]
        if any(d.state == "claimed" and (d.lease_until or 0.0) > now for d in mine):
            return None
        stamp = iso_now(now)
        for d in sorted(
            (d for d in mine if d.state == "pending"), key=lambda d: (d.created_at, d.id)
        ):
            messages = self._members(d.id, unread=True)
            d.updated_at = stamp
            if not messages:
                # Everything in it was read another way (pull, hook): nothing left to redeliver.
                d.state = "acked"
                continue
            d.state, d.attempts, d.lease_until = "claimed", d.attempts + 1, now + lease_s
            return d.batch(messages)
        fresh = sorted((m for m in self._unread(agent) if m.delivery_id is None), key=_order)
        chosen: list[Message] = []
        for m in fresh if max_messages < 0 else fresh[:max_messages]:  # LIMIT -1: no limit
            if chosen and sum(c.size for c in chosen) + m.size > max_chars:
                break
            chosen.append(m)
        if not chosen:
            return None
        d = _Delivery(id=new_id("dlv"), agent=agent, state="claimed", attempts=1)
        d.lease_until, d.created_at, d.updated_at = now + lease_s, stamp, stamp
        self._deliveries[d.id] = d
        batch = d.batch(chosen)
        self._messages.update((m.id, m) for m in batch.messages)
        return batch

    @_atomic
    def ack_delivery(self, delivery_id: str, *, now: float) -> int:
        done = self._mark_read(m.id for m in self._members(delivery_id, unread=True))
        d = self._deliveries.get(delivery_id)
        if d is not None and d.state == "claimed":
            d.state, d.failures, d.lease_until, d.updated_at = "acked", 0, None, iso_now(now)
        return len(done)

    @_atomic
    def release(
        self, delivery_id: str, *, error: str, max_attempts: int, now: float, count: int = 1
    ) -> Released:
        d = self._deliveries.get(delivery_id)
        if d is None or d.state != "claimed":
            raise NotFound(f"no claimed delivery {delivery_id}")
        d.failures += count
        d.state = "dead" if d.failures >= max_attempts else "pending"
        d.lease_until, d.last_error, d.updated_at = None, error[:2000], iso_now(now)
        dead = self._members(delivery_id, unread=True) if d.state == "dead" else []
        return Released(state=d.state, failures=d.failures, messages=tuple(dead))

    @_atomic
    def extend_lease(self, delivery_id: str, *, lease_s: float, now: float) -> bool:
        d = self._deliveries.get(delivery_id)
        if d is None or d.state != "claimed":
            return False
        d.lease_until = now + lease_s
        return True

    @_atomic
    def reap_expired(self, *, now: float, everything: bool = False) -> list[tuple[str, str]]:
        reaped = []
        for d in self._deliveries.values():
            expired = d.lease_until is not None and d.lease_until <= now
            if d.state == "claimed" and (expired or everything):
                d.state, d.lease_until, d.updated_at = "pending", None, iso_now(now)
                reaped.append((d.id, d.agent))
        return sorted(reaped)

    @_atomic
    def dead_letters(self, agent: str | None = None) -> list[DeadLetter]:
        dead = [d for d in self._deliveries.values() if d.state == "dead"]
        return [
            DeadLetter(
                delivery_id=d.id,
                agent=d.agent,
                message_ids=tuple(
                    m.id for m in sorted(self._members(d.id, unread=False), key=_chrono)
                ),
                attempts=d.attempts,
                last_error=d.last_error,
                dead_at=d.updated_at,
            )
            for d in sorted(dead, key=lambda d: (d.updated_at, d.id))
            if not agent or d.agent == agent
        ]

    @_atomic
    def retry_dead(self, *, agent: str | None = None, delivery_id: str | None = None) -> list[str]:
        chosen = [
            d
            for d in self._deliveries.values()
            if d.state == "dead" and agent in (None, d.agent) and delivery_id in (None, d.id)
        ]
        for d in chosen:
            d.state, d.failures, d.updated_at = "pending", 0, iso_now()
        return [d.id for d in chosen]

    @_atomic
    def pending_agents(self) -> set[str]:
        unread = (m for m in self._messages.values() if not m.read)
        return {m.to_agent for m in unread if m.delivery_id is None or self._in_state(m, "pending")}

    @_atomic
    def counts(self) -> dict[str, AgentCounts]:
        unread = Counter(m.to_agent for m in self._messages.values() if not m.read)
        states = Counter((d.agent, d.state) for d in self._deliveries.values())
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

    @_atomic
    def totals(self) -> dict[str, int]:
        unread = sum(1 for m in self._messages.values() if not m.read)
        return {"messages": len(self._messages), "unread": unread}
