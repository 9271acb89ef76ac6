"""serve(): checks → lock → store → socket → recovery → task group(control server, signals,
supervisor, checkpoints, store watch, history pruning, long-unread escalation).

Before anything touches the store: the store directory must not be writable by other users, the
lock (named from the store's resolved path) must be ours, the file must have one hard link and
pass ``PRAGMA quick_check``. The control socket is bound before crash recovery runs, so a second
daemon that slipped past the lock still cannot re-queue the first one's work. Every start-up
failure reaches the CLI as one ``AgentmaildError`` (never an exception group).

While running, the store watch checks once a tick that the store's path still names the file the
daemon opened; when it was replaced or deleted the daemon stops at once (see ``_abandon``).

Shutdown is deadline-bounded: the first SIGTERM/SIGINT (or ``shutdown`` on the socket) stops new
claims and lets deliveries in flight finish within ``shutdown_grace_s``; what is left is cancelled
and released. A second signal cancels at once. SIGHUP reloads the config. Signals become events in
exactly one task (``_signals``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Coroutine
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
from agentmaild.control.wake import WakeReceiver
from agentmaild.daemon.checkpoints import Checkpointer, empty_wal
from agentmaild.daemon.journal import StoreProcJournal
from agentmaild.daemon.lock import hold_lock
from agentmaild.daemon.recovery import recover
from agentmaild.daemon.retention import HistoryPruner
from agentmaild.delivery.supervisor import Supervisor
from agentmaild.errors import AgentmaildError
from agentmaild.ids import iso_now
from agentmaild.log import configure_logging
from agentmaild.mail import Mailer
from agentmaild.models import Agent
from agentmaild.procs.escapes import become_subreaper
from agentmaild.rules.ask import ReplyWaiters
from agentmaild.rules.escalate import UnreadEscalator
from agentmaild.store.aio import AsyncMailStore, Gate, PollGate
from agentmaild.store.check import refuse_damaged
from agentmaild.store.files import (
    FileIdentity,
    check_private_dir,
    identity,
    make_store_dir,
    refuse_hard_links,
    resolved,
)
from agentmaild.store.location import StoreLocation
from agentmaild.store.sqlite import SqliteMailStore

log = structlog.get_logger(__name__)

_WATCH_TICK_S = 1.0
STORE_LOST_EXIT = 1


def serve(db: Path | str | StoreLocation, config: Config) -> int:
    """Run the daemon for ``db`` (a location, a file, or a PostgreSQL DSN) until shut down; 0
    after a clean drain.

    Raises ``AgentmaildError`` when it cannot start: another daemon holds the store's lock (the
    error names its pid), the store or its directory is unsafe, or the store is damaged.
    """
    configure_logging(config.log.level, config.log.format, config.log.file)
    location = StoreLocation.of(db)
    if not location.is_file:
        from agentmaild.daemon.serve_pg import serve_pg

        try:
            return serve_pg(location.target, config)
        except BaseExceptionGroup as group:
            raise first_error(group) from None
    given = location.local_path.absolute()
    try:
        return _serve(given, resolved(given), config)
    except BaseExceptionGroup as group:
        raise first_error(group) from None


def _serve(given: Path, real: Path, config: Config) -> int:
    if config.http.listen:  # a refused address fails the start before the store is touched
        from agentmaild.http.server import check_listen

        check_listen(config.http)
    make_store_dir(real.parent)
    check_private_dir(real.parent)
    with hold_lock(real):
        refuse_hard_links(real)
        if config.daemon.quick_check:
            refuse_damaged(real)
        options: dict[str, Any] = {}
        try:
            import uvloop  # noqa: F401  (only probing that it is installed)

            options["use_uvloop"] = True
        except ImportError:
            pass
        return anyio.run(_main, given, real, config, backend="asyncio", backend_options=options)


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first ``AgentmaildError`` inside a task group's exception group, else the group."""
    matched, _rest = group.split(AgentmaildError)
    leaf: BaseException | None = matched
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf if leaf is not None else group


async def _main(given: Path, db: Path, config: Config) -> int:
    # Escaped agent descendants (setsid, double fork) are re-parented to us, not to init, so a
    # scope can still find, stop and reap them (procs.escapes); elsewhere only groups are stopped.
    subreaper = become_subreaper()  # logged once start-up succeeded: a failure is one line
    store = SqliteMailStore(db, flavor=config.store.flavor)
    opened = identity(db)
    astore = AsyncMailStore(store, inline_writes=True)
    try:
        gate = await PollGate.open(db)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await astore.aclose()
        raise
    try:
        daemon = Daemon(db, config, astore, gate, StoreProcJournal(astore))
        daemon.watch(given, opened)
        daemon.subreaper = subreaper
        return await daemon.run()
    finally:
        await gate.aclose()
        with anyio.CancelScope(shield=True):
            await astore.aclose()


class Daemon:
    """The running daemon: its task group, shutdown sequence and config reloads."""

    def __init__(
        self,
        db: Path,
        config: Config,
        store: AsyncMailStore,
        gate: Gate,
        journal: StoreProcJournal | None = None,
    ) -> None:
        self.db = db
        self.journal = journal
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
        self._watched: tuple[Path, FileIdentity] | None = None
        self.store_lost: str | None = None  # "replaced" | "deleted" once the watch saw it
        self.host: str | None = None  # on a store shared by hosts: the one this daemon serves
        self.outages: Any = None  # a PostgreSQL store's (daemon.pg_outages.Outages)
        self.subreaper = False  # escaped agent descendants come back to us (Linux)
        self.http_address: str | None = None  # "HOST:PORT" once the HTTP face is bound
        self.waiters = ReplyWaiters()  # `ask`s holding an await_reply request
        self.background: list[Callable[[], Coroutine[Any, Any, None]]] = []

    def watch(self, path: Path, opened: FileIdentity | None) -> None:
        """Check once a tick that ``path`` still names the file ``opened`` identifies."""
        self._watched = (path, opened) if opened is not None else None

    def _make_channel(self, agent: Agent, config: Config) -> Any:
        from agentmaild.channels.factory import make_channel  # channels load their deps lazily

        return make_channel(agent, config, self.store.sync.location, procs=self.journal)

    @property
    def shutdown_event(self) -> anyio.Event:
        return self._shutdown

    def request_shutdown(self) -> None:
        self._shutdown.set()

    @property
    def stopping(self) -> bool:
        return self._shutdown.is_set()

    async def run(self) -> int:
        server = ControlServer(self.socket, ControlHandler(self).handle)
        await server.listen()  # before recovery: a second daemon must fail before it re-queues
        wake = WakeReceiver(self.socket, self.woken, self.recheck)  # senders' datagrams
        wake.bind()
        log.info("daemon.subreaper", enabled=self.subreaper)
        try:
            await recover(
                self.store, self.db, kill_grace_s=self.config.spawn.kill_grace_s, host=self.host
            )
            if self.journal is not None:
                await self.journal.load()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._signals, tg.cancel_scope)
                # Loops first: the socket is bound (connections wait in its backlog), but a
                # command is answered only once every registered agent has its loop.
                await tg.start(self._run_supervisor)
                await tg.start(server.serve)
                tg.start_soon(wake.run)
                if self.config.http.listen:  # the HTTP face (agentmaild.http), off by default
                    from agentmaild.http.server import serve_daemon_http

                    host, port = await tg.start(serve_daemon_http, self)
                    self.http_address = f"{host}:{port}"
                if isinstance(self.store.sync, SqliteMailStore):  # PostgreSQL has no WAL of ours
                    tg.start_soon(
                        Checkpointer(self.db, self.store, lambda: self.config.daemon,
                                     self._shutdown).run
                    )
                tg.start_soon(self._watch_store)
                for task in self.background:  # the store's own wake-ups (PostgreSQL LISTEN)
                    tg.start_soon(task)
                tg.start_soon(
                    HistoryPruner(self.store, lambda: self.config.store, self._shutdown).run
                )
                tg.start_soon(
                    UnreadEscalator(self.store, lambda: self.config.limits, self._shutdown).run
                )
                log.info("daemon.started", pid=os.getpid(),
                         db=str(getattr(self.store.sync, "path", self.db)),
                         socket=str(self.socket), version=__version__,
                         agents=len(self.supervisor.agents))
                await self._shutdown.wait()
                await (self._abandon() if self.store_lost else self._drain())
                tg.cancel_scope.cancel()
        finally:
            wake.close()
            await server.aclose()
        log.info("daemon.stopped", forced=self.forced, store_lost=self.store_lost)
        return STORE_LOST_EXIT if self.store_lost else 1 if self.forced else 0

    def woken(self, agents: list[str] | None) -> list[str]:
        """New mail for ``agents`` (None: anyone), from a wake datagram or request: askers waiting
        in those threads and the agents' loops look again; returns the loops woken."""
        self.waiters.notify(agents)
        return self.supervisor.wake(agents)

    def recheck(self) -> None:
        """Wake-ups may have been lost: every waiter and loop looks at the store again."""
        self.waiters.notify(None)
        self.supervisor.recheck()

    async def _watch_store(self) -> None:
        """One ``stat`` a tick: a store replaced (``mv backup.db mail.db``) or deleted under us
        stops the daemon, so a supervisor restarts it on whatever the path names now."""
        if self._watched is None:
            return
        path, opened = self._watched
        while not self._shutdown.is_set():
            with anyio.move_on_after(_WATCH_TICK_S):
                await self._shutdown.wait()
            try:
                now = identity(path)
            except OSError as exc:  # cannot tell (a directory's permissions): keep serving
                log.warning("daemon.store_unverified", db=str(path), error=str(exc))
                continue
            if now == opened or self._shutdown.is_set():
                continue
            self.store_lost = "deleted" if now is None else "replaced"
            event = "daemon.store_deleted" if now is None else "daemon.store_replaced"
            log.critical(event, db=str(path), opened_inode=opened.ino,
                         now_inode=now.ino if now is not None else None)
            self._shutdown.set()
            return

    async def _abandon(self) -> None:
        """Stop at once after the store's path stopped naming our file: nothing more is claimed,
        deliveries in flight are released into the file we opened, then that file's WAL is
        emptied into it. SQLite finds the WAL by *name*: left behind, its frames would be
        replayed into whatever file now has the store's name."""
        log.info("daemon.stopping", grace_s=0, in_flight=self.supervisor.in_flight())
        self.supervisor.abort()
        await self._supervisor_done.wait()
        with anyio.CancelScope(shield=True):
            emptied = await self.store.run_sync(empty_wal, self.store.sync)
        if not emptied:
            log.critical("daemon.wal_not_emptied", db=str(self.db),
                         hint="stop every process using the store before opening it again")

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
