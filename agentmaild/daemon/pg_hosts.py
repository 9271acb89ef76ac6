"""The host daemons of a PostgreSQL store: each beats a row of ``am_hosts`` (pid, host, last beat),
and ``status`` reads every host's row; a host whose beat is older than 3 leases is shown as down
(a crashed daemon's); a daemon that stops cleanly removes its row.

The beat runs on a connection of its own (a blocking psycopg call in a worker thread), so a slow
store never holds up delivery; a failed beat is logged and tried again at the next interval.
"""

from __future__ import annotations

import os
import time
from typing import Any

import anyio
import psycopg
import structlog

log = structlog.get_logger(__name__)

DOWN_AFTER_LEASES = 3
_BEAT = (
    "INSERT INTO am_hosts (host, pid, started_at, beat_at, lease_s) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (host) DO UPDATE SET pid = EXCLUDED.pid, started_at = EXCLUDED.started_at, "
    "beat_at = EXCLUDED.beat_at, lease_s = EXCLUDED.lease_s"
)


class PgHeartbeat:
    """Beat ``host``'s row every ``interval_s`` until cancelled."""

    def __init__(self, dsn: str, host: str, lease_s: float) -> None:
        self._dsn, self._host, self._lease_s = dsn, host, lease_s
        self._started = time.time()
        self.interval_s = max(0.2, min(5.0, lease_s / 3))

    def _beat(self) -> None:
        with psycopg.connect(self._dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute(
                _BEAT, (self._host, os.getpid(), self._started, time.time(), self._lease_s)
            )

    def _forget(self) -> None:
        with psycopg.connect(self._dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute("DELETE FROM am_hosts WHERE host = %s AND pid = %s",
                         (self._host, os.getpid()))

    async def run(self) -> None:
        try:
            while True:
                try:
                    await anyio.to_thread.run_sync(self._beat, abandon_on_cancel=True)
                except psycopg.Error as exc:
                    log.warning("daemon.heartbeat_failed", host=self._host, error=str(exc))
                await anyio.sleep(self.interval_s)  # a timer, not a wait for work
        finally:  # a clean stop leaves no row behind; a crash leaves one that goes "down"
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await anyio.to_thread.run_sync(self._forget)
                except psycopg.Error as exc:
                    log.warning("daemon.heartbeat_forget_failed", host=self._host, error=str(exc))


def read_hosts(dsn: str, now: float | None = None) -> list[dict[str, Any]]:
    """Every host's daemon as ``status`` shows it: host, pid, last beat, age, up or down;
    ``StoreError`` when the store cannot be read."""
    from agentmaild.errors import StoreError

    now = time.time() if now is None else now
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT host, pid, started_at, beat_at, lease_s FROM am_hosts ORDER BY host"
            ).fetchall()
    except psycopg.Error as exc:
        raise StoreError(f"cannot read the hosts of the store: {exc}") from exc
    hosts = []
    for host, pid, started_at, beat_at, lease_s in rows:
        age = max(0.0, now - float(beat_at))
        hosts.append({
            "host": host, "pid": pid, "started_at": started_at, "beat_at": beat_at,
            "age_s": round(age, 1),
            "state": "down" if age > DOWN_AFTER_LEASES * float(lease_s) else "up",
        })
    return hosts
