"""The daemon's async view of the store: one worker thread per transaction, plus the poll gate.

``AsyncMailStore`` runs every call of a synchronous ``MailStore`` in a worker thread, one at a
time (``hops.Hops``): the store's single connection is never used by two threads at once; calls
queued while a hop runs share the next hop, and the delivery calls among them (claims, acks,
releases, lease extensions, marked ``groupable``) share one transaction where the store can
(``MailStore.run_grouped``; SQLite's is a group commit); every other call is one transaction. A
read marked ``quick_read`` runs in the event loop's thread instead when no hop runs or waits. A
caller cancelled meanwhile still gets its result, so a claim that committed always returns to its
caller, who can then release it.

``PollGate`` answers "which agents have deliverable mail?" for the supervisor's poll tick on a
separate read-only aiosqlite connection. An idle tick costs one read of the store's change mark
(``store.marks``: ``PRAGMA data_version``, which only changes when another connection commits);
only then does it run one ``pending_agents`` query for all agents — never one query per agent per
tick.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiosqlite
import anyio
import anyio.to_thread

from agentmaild.errors import StoreError
from agentmaild.models import Agent, AgentCounts, Attempt, Batch, DeadLetter
from agentmaild.store.base import MailStore
from agentmaild.store.hops import Hops, groupable, is_groupable, is_quick_read, quick_read
from agentmaild.store.looks import Looks
from agentmaild.store.marks import SQLITE_MARK
from agentmaild.store.queries import Q
from agentmaild.store.records import Released

T = TypeVar("T")


class AsyncMailStore:
    """Async facade over a sync ``MailStore``; the daemon's only way to touch it."""

    def __init__(
        self, store: MailStore, *, concurrency: int = 1, inline_writes: bool = False
    ) -> None:
        """``concurrency`` > 1 only for a store whose calls may overlap (a connection pool).

        ``inline_writes`` (the daemon's SQLite store): a claim or ack made while the store's
        thread is idle runs at once in the event loop's thread when it needs no wait
        (``store.hops``), saving two thread wake-ups each."""
        self.sync = store
        # One call at a time, as a CapacityLimiter(1) would; groupable calls queued together
        # share a transaction where the store can (SQLite).
        self.hops = Hops(store.run_grouped, inline=store.run_inline if inline_writes else None)
        # With inline writes, the loops' looks for mail read elsewhere go to a read-only
        # connection of their own, in the event loop's thread (``store.looks``), if it has one.
        self._looks: Looks | None = store.open_looks() if inline_writes else None
        # A pooled store (PostgreSQL) takes overlapping calls: a thread each, up to the pool size.
        self._limiter = anyio.CapacityLimiter(concurrency) if concurrency > 1 else None

    async def run_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` in the store's worker thread (for callers such as ``Mailer``); calls made
        while a hop runs share the next one (``store.hops``), and share its transaction too when
        ``fn`` is marked ``groupable``."""
        call = partial(fn, *args, **kwargs) if kwargs else partial(fn, *args)
        if self._limiter is not None:
            return await anyio.to_thread.run_sync(call, limiter=self._limiter)
        return await self.hops.run(call, grouped=is_groupable(fn), quick=is_quick_read(fn))

    async def _grouped(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.run_sync(groupable(partial(fn, *args, **kwargs)))

    async def aclose(self) -> None:
        if self._looks is not None:
            self._looks.close()
        await self.run_sync(self.sync.close)

    # -- deliveries -------------------------------------------------------------------------
    async def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        return await self._grouped(
            self.sync.claim,
            agent,
            max_messages=max_messages,
            max_chars=max_chars,
            lease_s=lease_s,
            now=now,
        )

    def more_after(self, batch: Batch) -> bool:
        """Whether more may be claimable once ``batch`` settles (``MailStore.more_after``): False
        only when its claim saw nothing else (SQLite, PostgreSQL can tell); else True."""
        return self.sync.more_after(batch.delivery_id)

    def retry_after(self, agent: str) -> float | None:
        """After a claim that gave nothing: in how many seconds ``agent`` should claim again,
        when it left waiting queue work to members ahead in the queue's turn
        (``MailStore.retry_after``); else None (wait for a wake-up)."""
        return self.sync.retry_after(agent)

    async def ack_delivery(
        self, delivery_id: str, *, now: float, record: Attempt | None = None
    ) -> int:
        return await self._grouped(self.sync.ack_delivery, delivery_id, now=now, record=record)

    async def release(
        self,
        delivery_id: str,
        *,
        error: str,
        max_attempts: int,
        now: float,
        count: int = 1,
        record: Attempt | None = None,
    ) -> Released:
        return await self._grouped(
            self.sync.release,
            delivery_id,
            error=error,
            max_attempts=max_attempts,
            now=now,
            count=count,
            record=record,
        )

    async def unread_among(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are still unread: the loop's look for mail read elsewhere."""
        if self._looks is not None:
            found = self._looks.unread_among(ids)
            if found is not None:
                return found

        # A read by key: it may join the transaction of the claims and acks queued with it, or run
        # at once when the store's thread is idle (the common case when one message comes in).
        @quick_read
        @groupable
        def look() -> set[str]:
            return self.sync.unread_among(ids)

        return await self.run_sync(look)

    async def attach_to_delivery(self, message_id: str, delivery_id: str, agent: str) -> bool:
        return await self.run_sync(self.sync.attach_to_delivery, message_id, delivery_id, agent)

    async def extend_lease(self, delivery_id: str, *, lease_s: float, now: float) -> bool:
        return await self._grouped(self.sync.extend_lease, delivery_id, lease_s=lease_s, now=now)

    async def reap_expired(
        self,
        *,
        now: float,
        everything: bool = False,
        host: str | None = None,
        agent: str | None = None,
    ) -> list[tuple[str, str]]:
        return await self.run_sync(
            self.sync.reap_expired, now=now, everything=everything, host=host, agent=agent
        )

    async def dead_letters(self, agent: str | None = None) -> list[DeadLetter]:
        return await self.run_sync(self.sync.dead_letters, agent)

    async def retry_dead(
        self, *, agent: str | None = None, delivery_id: str | None = None
    ) -> list[str]:
        return await self.run_sync(self.sync.retry_dead, agent=agent, delivery_id=delivery_id)

    async def pending_agents(self) -> set[str]:
        return await self.run_sync(self.sync.pending_agents)

    async def counts(self) -> dict[str, AgentCounts]:
        return await self.run_sync(self.sync.counts)

    async def totals(self) -> dict[str, int]:
        return await self.run_sync(self.sync.totals)

    # -- delivery history -------------------------------------------------------------------
    async def record_attempt(self, attempt: Attempt) -> None:
        await self.run_sync(self.sync.record_attempt, attempt)

    async def purge_attempts(self, *, older_than: float) -> int:
        return await self.run_sync(self.sync.purge_attempts, older_than=older_than)

    # -- agents -----------------------------------------------------------------------------
    async def list_agents(self) -> list[Agent]:
        return await self.run_sync(self.sync.list_agents)

    async def get_agent(self, name: str) -> Agent | None:
        return await self.run_sync(self.sync.get_agent, name)

    async def update_agent(self, name: str, changes: dict[str, Any]) -> Agent:
        return await self.run_sync(self.sync.update_agent, name, changes)


class Gate(Protocol):
    """What the supervisor's poll tick asks a store: ``PollGate`` (SQLite), ``PgPollGate``."""

    async def changed(self) -> bool: ...

    async def registry_version(self) -> int: ...

    async def pending_agents(self) -> set[str]: ...

    async def aclose(self) -> None: ...


class PollGate:
    """Cheap change detection for the poll tick, on its own read-only connection."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._version: int | None = None

    @classmethod
    async def open(cls, db: Path) -> PollGate:
        try:
            conn = await aiosqlite.connect(f"file:{db}?mode=ro", uri=True)
            await conn.execute("PRAGMA busy_timeout = 5000")
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open {db} read-only for polling: {exc}") from exc
        return cls(conn)

    async def changed(self) -> bool:
        """True when another connection committed since the last call (and on the first)."""
        rows = await self._fetch(SQLITE_MARK)  # the store's change mark (store.marks)
        version = int(rows[0][0])
        seen, self._version = self._version, version
        return seen != version

    async def registry_version(self) -> int:
        """Bumped by every change to an agent's registration (triggers on ``am_agents``)."""
        rows = await self._fetch(Q["registry_version"])
        return int(rows[0][0]) if rows else 0

    async def pending_agents(self) -> set[str]:
        """Agents with mail the daemon could claim now: one query for all of them."""
        return {str(r[0]) for r in await self._fetch(Q["pending_agents"])}

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            async with self._conn.execute(sql, params) as cursor:
                return list(await cursor.fetchall())
        except sqlite3.Error as exc:  # re-raised as is from aiosqlite's thread
            raise StoreError(f"poll query failed: {exc}") from exc

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._conn.close()
