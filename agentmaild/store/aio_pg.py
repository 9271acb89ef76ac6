"""The poll gate of a PostgreSQL store: the daemon's cheap "did anything change?" per tick.

``changed()`` compares the store's change mark (``store.marks``: the server's snapshot ``xmax``,
which moves only when some transaction wrote), so an idle tick is one tiny query; only then does
the tick ask which agents have deliverable mail. It runs on a connection of its own, in a worker
thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_tx import PQ

T = TypeVar("T")


class PgPollGate:
    """The ``PollGate`` interface over PostgreSQL (see ``store.aio.PollGate``)."""

    def __init__(self, store: PostgresMailStore) -> None:
        self._store = store
        self._limiter = anyio.CapacityLimiter(1)
        self._xmax: object = None

    @classmethod
    async def open(cls, dsn: str) -> PgPollGate:
        store = await anyio.to_thread.run_sync(
            lambda: PostgresMailStore(dsn, readonly=True)
        )
        return cls(store)

    async def _run(self, fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn, limiter=self._limiter)

    async def changed(self) -> bool:
        xmax = await self._run(self._store.change_mark)
        seen, self._xmax = self._xmax, xmax
        return seen != xmax

    async def registry_version(self) -> int:
        rows = await self._run(lambda: self._store._read(PQ["registry_version"]))
        return int(rows[0]["version"]) if rows else 0

    async def pending_agents(self) -> set[str]:
        return await self._run(self._store.pending_agents)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._run(self._store.close)
