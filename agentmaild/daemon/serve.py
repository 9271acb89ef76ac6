"""serve(): lock → store → recovery → task group(control server, signals, supervisor, checkpoints,
history pruning).

Shutdown is deadline-bounded: the first SIGTERM/SIGINT (or ``shutdown`` on the socket) stops new
claims and lets deliveries in flight finish within ``shutdown_grace_s``; what is left is cancelled
and released. A second signal cancels at once. SIGHUP reloads the config. Signals become events in
exactly one task (``_signals``).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog

from agentmaild import __version__
from agentmaild.config import Config, load_config
from agentmaild.control.handler import ControlHandler
from agentmaild.control.protocol import socket_path_for
from agentmaild.control.server import ControlServer
from agentmaild.daemon.checkpoints import Checkpointer
from agentmaild.daemon.lock import hold_lock
from agentmaild.daemon.recovery import recover
from agentmaild.daemon.retention import HistoryPruner
from agentmaild.delivery.supervisor import Supervisor
from agentmaild.errors import AgentmaildError
from agentmaild.ids import iso_now
from agentmaild.log import configure_logging
from agentmaild.mail import Mailer
from agentmaild.models import Agent, ChannelKind
from agentmaild.store.aio import AsyncMailStore, PollGate
from agentmaild.store.sqlite import SqliteMailStore

log = structlog.get_logger(__name__)

# Agents whose process the daemon owned: a "busy" turn state left behind died with it.
_OWNED_CHANNELS = frozenset({ChannelKind.SPAWN, ChannelKind.STDIN})
_CHECKPOINT_TICK_S = 1.0
_CHECKPOINT_RETRY_S = 0.05
_TRUNCATE_BUSY_TIMEOUT_MS = 100


def serve(db: Path, config: Config) -> int:
    """Run the daemon for ``db`` until shut down; 0 after a clean drain.

    Raises ``ControlError`` naming the pid when another daemon holds the store's lock.
    """
    configure_logging(config.log.level, config.log.format, config.log.file)
    db = db.expanduser().absolute()
    with hold_lock(db):
        options: dict[str, Any] = {}
        try:
            import uvloop  # noqa: F401  (only probing that it is installed)

            options["use_uvloop"] = True
        except ImportError:
            pass
        return anyio.run(_main, db, config, backend="asyncio", backend_options=options)


async def _main(db: Path, config: Config) -> int:
    store = SqliteMailStore(db)
    astore = AsyncMailStore(store)
    gate = await PollGate.open(db)
    try:
        await recover(astore)
        return await Daemon(db, config, astore, gate).run()
    finally:
        await gate.aclose()
        with anyio.CancelScope(shield=True):
            await astore.aclose()


class Daemon:
    """The running daemon: its task group, shutdown sequence and config reloads."""

    def __init__(self, db: Path, config: Config, store: AsyncMailStore, gate: PollGate) -> None:
        self.db = db
        self.config = config
        self.store = store
        self.started = time.monotonic()
        self.started_at = iso_now()
        self.socket = config.daemon.socket or socket_path_for(db)
        mailer = Mailer(store.sync, config.limits)
        self.supervisor = Supervisor(store, mailer, config, self._make_channel, gate=gate)
        self.forced = False
        self._shutdown = anyio.Event()
        self._supervisor_done = anyio.Event()

    def _make_channel(self, agent: Agent, config: Config) -> Any:
        from agentmaild.channels.factory import make_channel  # channels load their deps lazily

        return make_channel(agent, config, self.db)

    def request_shutdown(self) -> None:
        self._shutdown.set()

    @property
    def stopping(self) -> bool:
        return self._shutdown.is_set()

    async def run(self) -> int:
        handler = ControlHandler(self)
        async with anyio.create_task_group() as tg:
            await tg.start(ControlServer(self.socket, handler.handle).serve)
            tg.start_soon(self._signals, tg.cancel_scope)
            await tg.start(self._run_supervisor)
            tg.start_soon(
                Checkpointer(self.db, self.store, lambda: self.config.daemon, self._shutdown).run
            )
            tg.start_soon(HistoryPruner(self.store, lambda: self.config.store, self._shutdown).run)
            log.info("daemon.started", pid=os.getpid(), db=str(self.db), socket=str(self.socket),
                     version=__version__, agents=len(self.supervisor.agents))
            await self._shutdown.wait()
            await self._drain()
            tg.cancel_scope.cancel()
        log.info("daemon.stopped", forced=self.forced)
        return 1 if self.forced else 0

    async def _run_supervisor(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            await self.supervisor.run(task_status=task_status)
        finally:
            self._supervisor_done.set()

    async def _drain(self) -> None:
        grace = self.config.daemon.shutdown_grace_s
        log.info("daemon.stopping", grace_s=grace, in_flight=self.supervisor.in_flight())
        self.supervisor.stop()
        with anyio.move_on_after(grace):
            await self._supervisor_done.wait()
        if not self._supervisor_done.is_set():
            log.warning("daemon.grace_expired", in_flight=self.supervisor.in_flight())
            self.supervisor.abort()  # cancelled deliveries are released, shielded
            await self._supervisor_done.wait()

    async def _signals(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                if signum == signal.SIGHUP:
                    log.info("daemon.signal", signal=name)
                    try:
                        await self.reload()
                    except AgentmaildError as exc:
                        log.error("daemon.reload_failed", error=exc.message)
                    continue
                if self._shutdown.is_set():
                    log.warning("daemon.forced", signal=name)
                    self.forced = True
                    scope.cancel()
                    return
                log.info("daemon.signal", signal=name)
                self._shutdown.set()

    async def reload(self) -> dict[str, Any]:
        """Re-read the config file and environment; apply it; re-sync the registry."""
        config = load_config(self.config.source, os.environ)
        configure_logging(config.log.level, config.log.format, config.log.file)
        self.config = config
        self.supervisor.update_config(config)
        await self.supervisor.sync()
        log.info("daemon.reloaded", source=str(config.source) if config.source else None)
        return {"reloaded": True, "source": str(config.source) if config.source else None}
