"""The daemon's housekeeping: delivery history older than ``[store] attempts_keep_days`` goes at
start and then once an hour, so ``am_attempts`` stays bounded without anyone running purge; and
rows of ours left naming messages another tool deleted (``ov mail purge``) are swept with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import structlog

from agentmaild.config import StoreConfig
from agentmaild.delivery.types import Clock
from agentmaild.errors import AgentmaildError
from agentmaild.store.aio import AsyncMailStore

log = structlog.get_logger(__name__)

PRUNE_INTERVAL_S = 3600.0
_DAY_S = 86400.0


class HistoryPruner:
    """``run()`` until ``stop`` is set; the store section is read afresh each time (SIGHUP)."""

    def __init__(
        self,
        store: AsyncMailStore,
        settings: Callable[[], StoreConfig],
        stop: anyio.Event,
        *,
        interval_s: float = PRUNE_INTERVAL_S,
        wall: Clock = time.time,
    ) -> None:
        self._store = store
        self._settings = settings
        self._stop = stop
        self._interval_s = interval_s
        self._wall = wall

    async def run(self) -> None:
        while not self._stop.is_set():
            await self.prune()
            with anyio.move_on_after(self._interval_s):
                await self._stop.wait()

    async def prune(self) -> int:
        """One pass; a failing store is logged and tried again next time, never fatal."""
        keep_days = self._settings().attempts_keep_days
        try:
            deleted = await self._store.purge_attempts(
                older_than=self._wall() - keep_days * _DAY_S
            )
        except AgentmaildError as exc:
            log.warning("daemon.history_prune_failed", error=exc.message)
            return 0
        if deleted:
            log.info("daemon.history_pruned", deleted=deleted, keep_days=keep_days)
        await self.sweep()
        return deleted

    async def sweep(self) -> int:
        try:
            swept = await self._store.run_sync(self._store.sync.sweep_orphans)
        except AgentmaildError as exc:
            log.warning("daemon.orphans_sweep_failed", error=exc.message)
            return 0
        if swept:
            log.info("daemon.orphans_swept", deleted=swept)
        return swept
