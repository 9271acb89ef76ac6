"""The real SQLite store, failing on cue: for the bookkeeping, loop and supervisor fault tests.

``faults[name]`` lists errors the next calls of ``name`` raise, first in first out; ``before[name]``
is called (in the store's worker thread) before every call of ``name``, to act at that moment.
Every call that gets past both runs the real store. ``lost[name]`` lists errors raised *after*
the real call ran: a write that committed but whose answer never came back (a connection that
died after COMMIT). The agent-scoped re-queue is ``reap_agent``, apart from ``reap_expired``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentmaild.errors import StoreError
from agentmaild.models import Attempt, Batch, Message
from agentmaild.store.records import InsertRequest, InsertResult, Released
from agentmaild.store.sqlite import SqliteMailStore


def store_full() -> StoreError:
    """What SQLite's full disk looks like once the store wrapped it."""
    return StoreError("database or disk is full")


class FaultyStore(SqliteMailStore):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.faults: dict[str, list[Exception]] = {}
        self.before: dict[str, Callable[[], None]] = {}
        self.calls: dict[str, int] = {}
        self.lost: dict[str, list[Exception]] = {}

    def _fault(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        hook = self.before.get(name)
        if hook is not None:
            hook()
        queued = self.faults.get(name)
        if queued:
            raise queued.pop(0)

    def _lose(self, name: str) -> None:
        queued = self.lost.get(name)
        if queued:
            raise queued.pop(0)

    def claim(self, agent: str, **kw: Any) -> Batch | None:
        self._fault("claim")
        batch = super().claim(agent, **kw)
        self._lose("claim")
        return batch

    def get_message(self, message_id: str) -> Message | None:
        self._fault("get_message")
        return super().get_message(message_id)

    def unread_among(self, ids: Sequence[str]) -> set[str]:
        self._fault("unread_among")
        return super().unread_among(ids)

    def reap_expired(self, **kw: Any) -> list[tuple[str, str]]:
        self._fault("reap_expired" if kw.get("agent") is None else "reap_agent")
        return super().reap_expired(**kw)

    def ack_delivery(self, delivery_id: str, *, now: float, record: Attempt | None = None) -> int:
        self._fault("ack_delivery")
        return super().ack_delivery(delivery_id, now=now, record=record)

    def release(self, delivery_id: str, **kw: Any) -> Released:
        self._fault("release")
        return super().release(delivery_id, **kw)

    def extend_lease(self, delivery_id: str, *, lease_s: float, now: float) -> bool:
        self._fault("extend_lease")
        return super().extend_lease(delivery_id, lease_s=lease_s, now=now)

    def record_attempt(self, attempt: Attempt) -> None:
        self._fault("record_attempt")
        super().record_attempt(attempt)

    def insert(self, request: InsertRequest) -> InsertResult:
        self._fault("insert")
        return super().insert(request)
