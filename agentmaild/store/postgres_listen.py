"""The daemon's side of a PostgreSQL store's wake-ups (``store.wake.NotifyWakes``): LISTEN on a
dedicated connection, wake the loops named.

A send NOTIFYs ``agentmaild_mail`` with its recipients (``*``: too many to name), a registry
change NOTIFYs ``agentmaild_registry``; both arrive at commit, from any machine. The names of a
notification wake those loops (a name this daemon does not serve costs one supervisor tick); a
registry change, ``*``, and every reconnection wake the supervisor for one full poll, since
notifications sent while the connection was down are lost. The poll interval stays the fallback.
"""

from __future__ import annotations

import anyio
import psycopg
import structlog
from anyio.abc import TaskStatus

from agentmaild.store.postgres_outages import Outages, first_line
from agentmaild.store.wake import OnWake, Wakes

log = structlog.get_logger(__name__)

MAIL_CHANNEL = "agentmaild_mail"
REGISTRY_CHANNEL = "agentmaild_registry"
_RETRY_INITIAL_S = 0.1
_RETRY_MAX_S = 5.0


class PgListener:
    """``run()`` until cancelled (the daemon's task group ends it at shutdown)."""

    def __init__(self, dsn: str, wake: OnWake, outages: Outages | None = None) -> None:
        self._dsn = dsn
        self._wake = wake
        self._outages = outages
        self.connections = 0  # how many times a LISTEN connection was established

    async def run(self) -> None:
        delay = _RETRY_INITIAL_S
        while True:
            try:
                await self._listen()
            except (psycopg.Error, OSError) as exc:
                log.warning("listener.lost", error=first_line(exc), retry_in_s=delay)
                if self._outages is not None:
                    self._outages.begin("listener", first_line(exc))
            self._wake(None)  # whatever was sent while nobody listened
            await anyio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX_S)

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self._dsn, autocommit=True, application_name="agentmaild listener"
        )
        async with conn:
            await conn.execute(f"LISTEN {MAIL_CHANNEL}")
            await conn.execute(f"LISTEN {REGISTRY_CHANNEL}")
            self.connections += 1
            if self._outages is not None:
                self._outages.end("listener")
            if self.connections > 1:
                self._wake(None)  # reconnected: one full poll covers what was missed
            log.info("listener.listening", connections=self.connections)
            async for note in conn.notifies():
                self._dispatch(note.channel, note.payload)

    def _dispatch(self, channel: str, payload: str) -> None:
        if channel == MAIL_CHANNEL and payload and payload != "*":
            self._wake(payload.split(","))
        else:
            self._wake(None)


class NotifyWakes(Wakes):
    """A PostgreSQL store's wake-ups: the send's in-transaction NOTIFY; LISTEN in the daemon."""

    def __init__(self, dsn: str, outages: Outages | None = None) -> None:
        self._dsn = dsn
        self._outages = outages
        self.listener: object | None = None  # the running ``PgListener`` (its connection count)

    def notify(self, agents: list[str] | None) -> None:
        """Nothing: the commit already sent the NOTIFY that wakes every host's daemon."""

    async def run(self, on_wake: OnWake, *, task_status: TaskStatus[None] | None = None) -> None:
        listener = PgListener(self._dsn, on_wake, self._outages)
        self.listener = listener
        if task_status is not None:  # what is sent before LISTEN holds, the first poll finds
            task_status.started()
        await listener.run()
