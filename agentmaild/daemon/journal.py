"""StoreProcJournal: the daemon's record of its agent processes, kept in ``am_agent_procs``.

Each process scope writes its leader's row once it runs and removes it once stopped, so after a
crash the next daemon knows what to stop (``daemon.orphans``). Rows found at start that recovery
could not clear belong to an earlier daemon: while their process lives, the agent counts as busy.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import anyio.to_thread
import structlog

from agentmaild.daemon.orphans import recorded_group_runs
from agentmaild.errors import StoreError
from agentmaild.procs.journal import ScopeRecord
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.records import AgentProc

log = structlog.get_logger(__name__)


class StoreProcJournal:
    """Implements ``procs.journal.ProcJournal`` over the daemon's store."""

    def __init__(self, store: AsyncMailStore) -> None:
        self._store = store
        self._earlier: dict[str, list[AgentProc]] = {}

    async def load(self) -> None:
        """Take the rows left in the table now (before any scope of ours) as an earlier daemon's."""
        self._earlier = {}
        for row in await self._store.run_sync(self._store.sync.list_procs):
            self._earlier.setdefault(row.agent, []).append(row)

    def scope(self, agent: str, delivery_id: str | None) -> ScopeRecord:
        return _StoreScope(self._store, agent, delivery_id)

    async def held_by(self, agent: str) -> int | None:
        rows = self._earlier.get(agent)
        if not rows:
            return None
        for row in rows:
            if await anyio.to_thread.run_sync(recorded_group_runs, row):
                return row.pid
        del self._earlier[agent]
        for row in rows:
            await _quietly(self._store, "forget", self._store.sync.forget_proc, row.pid,
                           row.start_time)
        return None


class _StoreScope:
    def __init__(self, store: AsyncMailStore, agent: str, delivery_id: str | None) -> None:
        self._store = store
        self._agent = agent
        self._delivery_id = delivery_id

    async def started(self, pid: int, start_time: str) -> None:
        row = AgentProc(
            pid=pid, start_time=start_time, pgid=pid, agent=self._agent,
            delivery_id=self._delivery_id, daemon_pid=os.getpid(), started_at=time.time(),
        )
        await _quietly(self._store, "record", self._store.sync.record_proc, row)

    async def stopped(self, pid: int, start_time: str) -> None:
        await _quietly(self._store, "forget", self._store.sync.forget_proc, pid, start_time)


async def _quietly(
    store: AsyncMailStore, what: str, fn: Callable[..., object], *args: object
) -> None:
    # The journal is a safety net: a store hiccup must not fail the turn it describes (the
    # scope marker in the environment still lets recovery find the process).
    try:
        await store.run_sync(fn, *args)
    except StoreError as exc:
        log.warning("proc.journal_failed", action=what, error=exc.message)
