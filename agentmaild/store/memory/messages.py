"""The message operations of the in-memory fake: insert with its limits, reads, pulls, purge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agentmaild.errors import StoreError
from agentmaild.ids import iso_now
from agentmaild.models import Message
from agentmaild.store import checks
from agentmaild.store.memory.rules import MemoryRules
from agentmaild.store.memory.state import RateLog, atomic, chrono, order
from agentmaild.store.records import InsertRequest, InsertResult


class MemoryMessages(MemoryRules):
    """The ``MailStore`` message operations over the fake's dicts."""

    @atomic
    def find_idempotent(self, sender: str, key: str, digest: str) -> InsertResult | None:
        seen = self._idempotency.get((sender, key))
        if seen is None:
            return None
        conflict = checks.idempotency_conflict(sender, key, seen[0], digest)
        if conflict is not None:
            raise conflict
        found = (self._messages.get(i) for i in seen[1])
        return InsertResult(messages=tuple(m for m in found if m is not None), duplicate=True)

    @atomic
    def insert(self, request: InsertRequest) -> InsertResult:
        if request.idempotency is not None:
            earlier = self.find_idempotent(*request.idempotency)
            if earlier is not None and checks.replays(earlier.messages):
                return earlier
            if earlier is not None:  # every message it wrote was deleted since: the key is free
                del self._idempotency[request.idempotency[:2]]
        repeat = self._collapsed(request)
        if repeat is not None:
            return repeat
        # Checks first, writes after: a refused insert leaves nothing behind (a rollback).
        for name in request.check_recipients:
            agent = self._agents.get(name)
            request.check_recipient(name, agent.state if agent else None)
        self._check_unread_cap(request)
        rate_log = self._check_rate(request)
        if self._trips_thread_guard(request):
            self._rate_log = rate_log
            return InsertResult(messages=(), held=True)
        self._write_insert(request, rate_log)
        self._remember(request)
        return InsertResult(messages=request.messages)

    def _check_unread_cap(self, req: InsertRequest) -> None:
        for to in {m.to_agent for m in req.messages} if req.unread_max > 0 else ():
            if checks.unread_cap_reached(sum(1 for _ in self._unread(to)), req.unread_max):
                raise checks.inbox_full(to, req.unread_max)

    def _check_rate(self, req: InsertRequest) -> RateLog:
        if req.rate_limit_max <= 0:
            return self._rate_log
        window_s = req.rate_limit_window_s
        since = checks.window_start(req.now, window_s)
        log = [e for e in self._rate_log if e[2] > checks.rate_trim_before(req.now, window_s)]
        for m in req.messages:
            pair = (m.from_agent, m.to_agent)
            sent = sum(1 for f, t, at in log if (f, t) == pair and at > since)
            refusal = checks.rate_limited(*pair, sent, req.rate_limit_max, window_s)
            if refusal is not None:
                raise refusal
            log.append((*pair, req.now))
        return log

    def _write_insert(self, req: InsertRequest, rate_log: RateLog) -> None:
        clash = [m.id for m in req.messages if m.id in self._messages]
        if clash or len({m.id for m in req.messages}) != len(req.messages):
            raise StoreError(f"store write failed: duplicate message id {clash}")
        self._messages.update(
            (m.id, replace(m, read=False, delivery_id=None, acked_at=None, acked_by=None))
            for m in req.messages
        )
        for agent, message_id, reason in req.nudges:
            self._nudges.setdefault((agent, message_id), (reason, iso_now(req.now)))
        if req.idempotency is not None:
            sender, key, digest = req.idempotency
            self._idempotency[(sender, key)] = (digest, tuple(m.id for m in req.messages))
        self._rate_log = rate_log

    @atomic
    def get_message(self, message_id: str) -> Message | None:
        return self._messages.get(message_id)

    @atomic
    def inbox(self, agent: str, *, unread_only: bool = False) -> list[Message]:
        mine = (m for m in self._messages.values() if m.to_agent == agent)
        return sorted((m for m in mine if not (unread_only and m.read)), key=chrono)

    @atomic
    def take_unread(self, agent: str, *, max_chars: int = 0, ack: bool = True) -> list[Message]:
        taken: list[Message] = []
        for m in sorted(self._unread(agent), key=order):
            if self._in_state(m, "claimed"):
                continue  # in flight to the daemon: the pull side must not take it too
            if max_chars and taken and sum(t.size for t in taken) + m.size > max_chars:
                break
            taken.append(m)
        if ack and taken:
            self._mark_read((m.id for m in taken), "pull")
            self._mark_reached(agent)
            taken = [replace(m, read=True) for m in taken]
        return taken

    @atomic
    def ack(self, message_ids: Sequence[str], *, by: str = "pull") -> list[str]:
        return self._mark_read(message_ids, by)

    @atomic
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

        found = sorted(filter(keep, self._messages.values()), key=chrono, reverse=True)
        return found if limit is None or limit < 0 else found[:limit]  # LIMIT -1: no limit

    @atomic
    def thread(self, thread_id: str) -> list[Message]:
        found = (m for m in self._messages.values() if thread_id in (m.thread_id, m.id))
        return sorted(found, key=chrono)

    @atomic
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
        self.sweep_orphans()
        return len(gone)

    def _drop_orphan_deliveries(self) -> None:
        """Deliveries left with no message at all are history nobody can act on."""
        live = {m.delivery_id for m in self._messages.values()}
        for d in [d for d in self._deliveries.values() if d.state != "claimed"]:
            if d.id not in live:
                del self._deliveries[d.id]

    @atomic
    def sweep_orphans(self) -> int:
        before = len(self._nudges) + len(self._deliveries) + len(self._idempotency)
        self._nudges = {k: v for k, v in self._nudges.items() if k[1] in self._messages}
        self._drop_orphan_deliveries()
        self._idempotency = {
            k: v for k, v in self._idempotency.items() if any(i in self._messages for i in v[1])
        }
        return before - len(self._nudges) - len(self._deliveries) - len(self._idempotency)

    @atomic
    def reset_rate_limit(self, from_agent: str, to_agent: str) -> int:
        kept = [e for e in self._rate_log if e[:2] != (from_agent, to_agent)]
        n, self._rate_log = len(self._rate_log) - len(kept), kept
        return n

    @atomic
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
