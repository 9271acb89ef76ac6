"""The daemon's WAL checkpointer: PASSIVE on an interval, TRUNCATE once the WAL grows large.

It runs on a connection of its own and turns off the store connection's auto-checkpoint, so
neither the daemon's commits nor the senders' ever pay for a checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import structlog

from agentmaild.config import DaemonConfig
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore, connect

log = structlog.get_logger(__name__)

_CHECKPOINT_TICK_S = 1.0
_CHECKPOINT_RETRY_S = 0.05
_TRUNCATE_BUSY_TIMEOUT_MS = 100
_TRUNCATE_TRY_MS, _TRUNCATE_PAUSE_S = 3, 0.0002  # one try's busy wait; the pause between tries


class Checkpointer:
    """``run()`` until ``stop`` is set; the daemon section is read afresh each tick (SIGHUP)."""

    def __init__(
        self,
        db: Path,
        store: AsyncMailStore,
        settings: Callable[[], DaemonConfig],
        stop: anyio.Event,
    ) -> None:
        self.db = db
        self.store = store
        self._settings = settings
        self._shutdown = stop

    async def run(self) -> None:
        """PASSIVE checkpoints on a connection of our own, TRUNCATE once the WAL grows large."""
        limiter = anyio.CapacityLimiter(1)
        conn = await anyio.to_thread.run_sync(connect, self.db, limiter=limiter)
        await self.store.run_sync(self._disable_autocheckpoint)
        wal = self.db.with_name(self.db.name + "-wal")
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        last = time.monotonic()
        retry_soon = False
        try:
            while not self._shutdown.is_set():
                daemon = self._settings()
                tick = min(_CHECKPOINT_TICK_S, daemon.checkpoint_interval_s)
                # A large WAL is looked at again at once-ish (see below): under sustained load
                # it would otherwise grow for another whole tick.
                with anyio.move_on_after(_CHECKPOINT_RETRY_S if retry_soon else tick):
                    await self._shutdown.wait()
                size = _file_size(wal)
                large = size > daemon.wal_checkpoint_pages * page_size
                if not (large or time.monotonic() - last >= daemon.checkpoint_interval_s):
                    continue
                last = time.monotonic()
                mode = "TRUNCATE" if large else "PASSIVE"
                await anyio.to_thread.run_sync(_checkpoint, conn, mode, limiter=limiter)
                # After a large WAL, look again soon: under sustained load it refills in well
                # under a tick (tens of KiB per message), busy checkpoint or not.
                retry_soon = large
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(conn.close, limiter=limiter)

    def _disable_autocheckpoint(self) -> None:
        """Our task checkpoints, so the daemon's own commits never pay for it."""
        sync = self.store.sync
        if isinstance(sync, SqliteMailStore):
            sync.connection.execute("PRAGMA wal_autocheckpoint = 0")


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _checkpoint(conn: Any, mode: str) -> bool:
    """Run one checkpoint; True when it could not finish (readers or a writer were in the way).

    TRUNCATE tries again and again for up to ``_TRUNCATE_BUSY_TIMEOUT_MS``, each try waiting a
    few milliseconds at most: writers poll for the write lock every fraction of a millisecond
    (``SqliteTransactions._begin``), so one long sleep in SQLite's busy handler would lose the
    lock to them every time while the WAL grows.
    """
    deadline = time.monotonic() + _TRUNCATE_BUSY_TIMEOUT_MS / 1000
    if mode == "TRUNCATE":
        conn.execute(f"PRAGMA busy_timeout = {_TRUNCATE_TRY_MS}")
    try:
        while True:
            busy, frames, done = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            if not busy or mode != "TRUNCATE" or time.monotonic() > deadline:
                break
            time.sleep(_TRUNCATE_PAUSE_S)
    except Exception as exc:  # sqlite3.Error: a checkpoint is an optimisation, never fatal
        log.warning("daemon.checkpoint_failed", mode=mode, error=str(exc))
        return True
    finally:
        conn.execute("PRAGMA busy_timeout = 5000")
    log.debug("daemon.checkpointed", mode=mode, busy=busy, frames=frames, checkpointed=done)
    return bool(busy)


def empty_wal(store: Any, attempts: int = 3) -> bool:
    """Checkpoint the whole WAL into the database file ``store`` has open and cut it to zero bytes.

    For a daemon whose store path was replaced or deleted: its connections still hold the old file,
    so the frames land there, while the WAL file (found by name) is left empty for whoever opens
    the path next. True when the WAL was emptied.
    """
    if not isinstance(store, SqliteMailStore):
        return True
    for _ in range(attempts):
        try:
            busy = store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except Exception as exc:  # sqlite3.Error: reported, the daemon is exiting anyway
            log.error("daemon.checkpoint_failed", mode="TRUNCATE", error=str(exc))
            return False
        if not busy:
            return True
    return False
