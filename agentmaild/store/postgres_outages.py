"""Outages of a PostgreSQL store as a daemon lives through them, and the host lock kept across one.

``Outages`` records each time the daemon lost its store — the LISTEN connection dropped, the
host lock's session ended (a database restart, ``pg_terminate_backend``) — with when it began,
when it ended and the error; ``status`` shows them (``daemon.outages``). ``PgLockKeeper`` checks
the host lock's session once an interval and, once it is gone, reconnects (backing off) and takes
the lock again: a daemon that outlives a database restart is still the one daemon of its host. If
another daemon of this host took the lock in the meantime, this one stops.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import structlog

from agentmaild.errors import ControlError
from agentmaild.ids import iso_now
from agentmaild.store.postgres_lock import PgHostLock

log = structlog.get_logger(__name__)

_KEEP = 20  # the outages status shows (the count covers all)
_RETRY_INITIAL_S, _RETRY_MAX_S = 0.1, 5.0


class Outages:
    """What broke (``"listener"``, ``"lock"``), since when, until when; at most one open each."""

    def __init__(self) -> None:
        self.count = 0
        self._rows: list[dict[str, Any]] = []
        self._open: dict[str, dict[str, Any]] = {}

    def begin(self, what: str, error: str) -> None:
        if what in self._open:
            return
        row = {"what": what, "since": iso_now(), "until": None, "error": error,
               "_t": time.monotonic()}
        self._open[what] = row
        self._rows = [*self._rows, row][-_KEEP:]
        self.count += 1

    def end(self, what: str) -> None:
        row = self._open.pop(what, None)
        if row is not None:
            row["until"] = iso_now()
            row["duration_s"] = round(time.monotonic() - row["_t"], 3)

    def snapshot(self) -> dict[str, Any]:
        rows = [{k: v for k, v in r.items() if k != "_t"} for r in self._rows]
        return {"count": self.count, "open": sorted(self._open), "recent": rows}


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PgLockKeeper:
    """``run()`` until cancelled: keep ``lock`` held; ``on_lost`` when another daemon has it."""

    def __init__(self, lock: PgHostLock, outages: Outages, interval_s: float,
                 on_lost: Callable[[], object]) -> None:
        self._lock, self._outages, self._on_lost = lock, outages, on_lost
        self.interval_s = interval_s
        self._limiter = anyio.CapacityLimiter(1)

    async def _call(self, fn: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True, limiter=self._limiter)

    async def run(self) -> None:
        while True:
            await anyio.sleep(self.interval_s)  # a timer: the session's end sends no event
            if not await self._call(self._lock.alive):
                if not await self._retake():
                    return

    async def _retake(self) -> bool:
        self._outages.begin("lock", "the host lock's session ended")
        log.warning("daemon.lock_session_lost", host=self._lock.host)
        delay = _RETRY_INITIAL_S
        while True:
            try:
                await self._call(self._lock.retake)
            except ControlError as exc:  # another daemon of this host holds it now: yield
                log.error("daemon.lock_taken_over", host=self._lock.host, error=exc.message)
                self._on_lost()
                return False
            except psycopg.Error as exc:
                log.warning("daemon.lock_retake_failed", error=first_line(exc), retry_in_s=delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)
                continue
            self._outages.end("lock")
            log.info("daemon.lock_retaken", host=self._lock.host)
            return True
