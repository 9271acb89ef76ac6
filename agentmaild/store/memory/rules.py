"""The team rules' part of the in-memory fake: the loop guard inside an insert, holds, counters,
and the team rules themselves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agentmaild.ids import iso_now
from agentmaild.mail.vocab import DAEMON_SENDER
from agentmaild.models import Message
from agentmaild.store import checks
from agentmaild.store.guard import RULE_COUNTERS
from agentmaild.store.memory.state import MemoryState, atomic, chrono
from agentmaild.store.records import InsertRequest, InsertResult


class MemoryRules(MemoryState):
    """Called from ``MemoryMessages.insert`` under its lock, as the SQL runs in its transaction."""

    def _bump(self, name: str, n: int = 1) -> None:
        self._counters[name] = self._counters.get(name, 0) + n

    def _collapsed(self, req: InsertRequest) -> InsertResult | None:
        if req.collapse is None:
            return None
        digest, window_s = req.collapse
        seen = self._recent_sends.get(digest)
        if seen is None or not checks.collapses(seen[1], req.now, window_s):
            return None
        found = tuple(self._messages[i] for i in seen[0] if i in self._messages)
        if not found:
            return None
        self._bump("collapsed")
        return InsertResult(messages=found, duplicate=True, collapsed=True)

    def _trips_thread_guard(self, req: InsertRequest) -> bool:
        g = req.thread_guard
        if g is None:
            return False
        if (g.thread_id, g.pair) in self._holds:
            raise checks.held_error(g.thread_id, g.pair)
        key = (g.thread_id, g.pair)
        since = checks.window_start(req.now, g.window_s)
        self._thread_log = [e for e in self._thread_log if e[:2] != key or e[2] > since]
        seen = sum(1 for e in self._thread_log if e[:2] == key)
        if not checks.trips_thread_cap(seen, g.max_messages):
            self._thread_log.append((*key, req.now))
            return False
        esc = g.escalation
        self._holds[key] = (seen, esc.id)
        self._messages[esc.id] = replace(esc, read=False, delivery_id=None)
        self._nudges.setdefault((esc.to_agent, esc.id), ("high escalation", iso_now(req.now)))
        return True

    def _remember(self, req: InsertRequest) -> None:
        if req.collapse is None:
            return
        digest, window_s = req.collapse
        self._recent_sends = {
            d: v for d, v in self._recent_sends.items() if checks.in_window(v[1], req.now, window_s)
        }
        self._recent_sends[digest] = (tuple(m.id for m in req.messages), req.now)

    @atomic
    def take_overdue(
        self, after_s: dict[str, float], *, now: float, limit: int = 500
    ) -> list[Message]:
        def due(m: Message) -> bool:
            wait = after_s.get(m.priority, 0)
            return (
                not m.read
                and wait > 0
                and m.from_agent != DAEMON_SENDER
                and m.id not in self._escalated
                and m.created_at < iso_now(now - wait)
            )

        found = sorted(filter(due, self._messages.values()), key=chrono)[:limit]
        self._escalated.update(m.id for m in found)
        if found:
            self._bump("unread_escalated", len(found))
        return found

    @atomic
    def rule_counters(self) -> dict[str, int]:
        return {**dict.fromkeys(RULE_COUNTERS, 0), **self._counters}

    @atomic
    def release_thread(self, thread_id: str) -> int:
        self._thread_log = [e for e in self._thread_log if e[0] != thread_id]
        held = [k for k in self._holds if k[0] == thread_id]
        for k in held:
            del self._holds[k]
        return len(held)

    @atomic
    def held_pairs(self, thread_id: str) -> set[str]:
        return {pair for thread, pair in self._holds if thread == thread_id}

    @atomic
    def team_rules(self) -> dict[str, Any]:
        return dict(self._team_rules)

    @atomic
    def set_team_rules(self, rules: Mapping[str, Any], *, now: float) -> bool:
        changed = dict(rules) != self._team_rules
        self._team_rules = dict(rules)
        return changed
