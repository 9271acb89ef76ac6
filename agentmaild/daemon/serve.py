"""serve(): the store's services → checks and lock → store → socket → recovery → the team rules
written into the store → task group (control server, signals, supervisor, wake-ups, the
backend's own tasks, history pruning, long-unread escalation).

The daemon never asks which backend it has: ``store.services.open_services`` gives it the checks
and one-daemon lock, the async store, the poll gate, the wake-ups and the background tasks its
backend needs (a store file's checkpointer and path watch; a PostgreSQL store's heartbeat and lock
keeper). The control socket is bound before crash recovery runs, so a second daemon that slipped
past the lock still cannot re-queue the first one's work. Every start-up failure reaches the CLI as
one ``AgentmaildError`` (never an exception group).

Shutdown is deadline-bounded: the first SIGTERM/SIGINT (or ``shutdown`` on the socket) stops new
claims and lets deliveries in flight finish within ``shutdown_grace_s``; what is left is cancelled
and released. A second signal cancels at once. SIGHUP reloads the config (the team rules and the
mid-turn policy included). Signals become events in one task (``_signals``). A store lost under
the daemon (its file replaced or deleted) stops it at once (``_abandon``).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import anyio
import anyio.abc
import structlog

from agentmaild import __version__
from agentmaild.config import Config, load_config, team_values
from agentmaild.control.handler import ControlHandler
from agentmaild.control.server import ControlServer
from agentmaild.daemon.journal import StoreProcJournal
from agentmaild.daemon.recovery import recover
from agentmaild.daemon.retention import HistoryPruner
from agentmaild.delivery.supervisor import Supervisor
from agentmaild.errors import AgentmaildError
from agentmaild.hooks.midturn import POLICY_ENV as MID_TURN_ENV
from agentmaild.ids import iso_now
from agentmaild.log import configure_logging
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.procs.cgroups import use_cgroups
from agentmaild.procs.escapes import become_subreaper
from agentmaild.rules.ask import ReplyWaiters
from agentmaild.rules.escalate import UnreadEscalator
from agentmaild.store.aio import AsyncMailStore, Gate
from agentmaild.store.kinds import open_services
from agentmaild.store.location import StoreLocation
from agentmaild.store.services import DaemonServices

log = structlog.get_logger(__name__)

STORE_LOST_EXIT = 1


def serve(location: StoreLocation, config: Config) -> int:
    """Run the daemon of ``location`` on this host until shut down; 0 after a clean drain.

    Raises ``AgentmaildError`` when it cannot start: another daemon holds the store's lock (the
    error names its pid), the store or its directory is unsafe, or the store is damaged.
    """
    configure_logging(config.log.level, config.log.format, config.log.file)
    try:
        if config.http.listen:  # a refused address fails the start before the store is touched
            from agentmaild.http.server import check_listen

            check_listen(config.http)
        services = open_services(location, config)
        with services.hold():
            return anyio.run(_main, services, backend="asyncio", backend_options=_options())
    except BaseExceptionGroup as group:
        raise first_error(group) from None


def _options() -> dict[str, Any]:
    try:
        import uvloop  # noqa: F401  (only probing that it is installed)
    except ImportError:
        return {}
    return {"use_uvloop": True}


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first ``AgentmaildError`` inside a task group's exception group, else the group."""
    matched, _rest = group.split(AgentmaildError)
    leaf: BaseException | None = matched
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf if leaf is not None else group


async def _main(services: DaemonServices) -> int:
    # Escaped agent descendants (setsid, double fork) are re-parented to us, not to init, so a
    # scope can still find, stop and reap them (procs.escapes); elsewhere only groups are stopped.
    subreaper = become_subreaper()  # logged once start-up succeeded: a failure is one line
    use_cgroups(services.config.daemon.cgroups)
    astore = await services.open_store()
    try:
        gate = await services.open_gate()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await astore.aclose()
        raise
    try:
        daemon = Daemon(services, services.config, astore, gate, StoreProcJournal(astore))
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
        services: DaemonServices,
        config: Config,
        store: AsyncMailStore,
        gate: Gate,
        journal: StoreProcJournal | None = None,
    ) -> None:
        self.services = services
        self.db = services.path  # the store's path on this machine (socket and logs beside it)
        self.journal = journal
        self.config = config
        self.store = store
        self.started = time.monotonic()
        self.started_at = iso_now()
        self.socket = services.socket
        mailer = Mailer(store.sync, config.limits)
        self.supervisor = Supervisor(store, mailer, config, self._make_channel, gate=gate)
        self.forced = False
        self._shutdown = anyio.Event()
        self._supervisor_done = anyio.Event()
        self.store_lost: str | None = None  # "replaced" | "deleted" once the store was lost
        self.host = services.host  # on a store shared by hosts: the one this daemon serves
        self.outages = services.outages  # what broke and when (`status`), if the store keeps it
        self.subreaper = False  # escaped agent descendants come back to us (Linux)
        self.http_address: str | None = None  # "HOST:PORT" once the HTTP face is bound
        self.waiters = ReplyWaiters()  # `ask`s holding an await_reply request

    def _make_channel(self, agent: Agent, config: Config) -> Any:
        from agentmaild.channels.factory import make_channel  # channels load their deps lazily

        return make_channel(agent, config, self.services.location, procs=self.journal)

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
        log.info("daemon.subreaper", enabled=self.subreaper)
        try:
            await recover(self.store, self.services.target,
                          kill_grace_s=self.config.spawn.kill_grace_s, host=self.host)
            if self.journal is not None:
                await self.journal.load()
            await self.publish_rules()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._signals, tg.cancel_scope)
                # Loops first: the socket is bound (connections wait in its backlog), but a
                # command is answered only once every registered agent has its loop.
                await tg.start(self._run_supervisor)
                await tg.start(self._serve_mcp)  # bound before a ping is answered
                await tg.start(server.serve)
                await tg.start(self.services.wakes.run, self.on_wake)  # senders reach us now
                if self.config.http.listen:  # the HTTP face (agentmaild.http), off by default
                    from agentmaild.http.server import serve_daemon_http

                    host, port = await tg.start(serve_daemon_http, self)
                    self.http_address = f"{host}:{port}"
                for task in self.services.tasks(self):  # what the store's backend runs beside us
                    tg.start_soon(task)
                tg.start_soon(
                    HistoryPruner(self.store, lambda: self.config.store, self._shutdown).run
                )
                tg.start_soon(
                    UnreadEscalator(self.store, lambda: self.config.limits, self._shutdown).run
                )
                log.info("daemon.started", pid=os.getpid(), db=self.services.location.shown,
                         socket=str(self.socket), version=__version__,
                         agents=len(self.supervisor.agents))
                await self._shutdown.wait()
                await (self._abandon() if self.store_lost else self._drain())
                tg.cancel_scope.cancel()
        finally:
            await server.aclose()
        log.info("daemon.stopped", forced=self.forced, store_lost=self.store_lost)
        return STORE_LOST_EXIT if self.store_lost else 1 if self.forced else 0

    async def _serve_mcp(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """The spawned turns' MCP servers (``mcpserver.hosted``); the SDK loaded now if a preset
        agent will want it."""
        from agentmaild.mcpserver.hosted import McpSocket

        presets = any(a.preset for a in await self.store.list_agents())
        await McpSocket(self.socket, self.services.location).serve(presets, task_status=task_status)

    def on_wake(self, agents: list[str] | None) -> None:
        """A wake-up from the store's seam (``store.wake``): the named agents have new mail; None:
        wake-ups may have been lost, so everyone looks at the store again."""
        if agents is None:
            self.recheck()
        else:
            self.woken(agents)

    def woken(self, agents: list[str] | None) -> list[str]:
        """New mail for ``agents`` (None: anyone), from a wake-up or a ``wake`` request: askers
        waiting in those threads and the agents' loops look again; returns the loops woken."""
        self.waiters.notify(agents)
        return self.supervisor.wake(agents)

    def recheck(self) -> None:
        """Wake-ups may have been lost: every waiter and loop looks at the store again."""
        self.waiters.notify(None)
        self.supervisor.recheck()

    def lose_store(self, how: str) -> None:
        """The store's path no longer names the store opened (``"replaced"``/``"deleted"``):
        stop at once (``_abandon``), so a supervisor restarts us on whatever it names now."""
        self.store_lost = how
        self._shutdown.set()

    async def _abandon(self) -> None:
        """Stop at once after the store was lost: nothing more is claimed, deliveries in flight
        are released into the store we opened, then its backend finishes with it."""
        log.info("daemon.stopping", grace_s=0, in_flight=self.supervisor.in_flight())
        self.supervisor.abort()
        await self._supervisor_done.wait()
        await self.services.abandon(self.store)

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

    async def publish_rules(self) -> None:
        """Team rules into the store; the mid-turn policy into every turn's environment (hooks)."""
        os.environ[MID_TURN_ENV] = self.config.delivery.mid_turn_priority
        rules = team_values(self.config.limits)
        changed = await self.store.run_sync(self.store.sync.set_team_rules, rules, now=time.time())
        log.info("daemon.team_rules", changed=changed, **rules)

    async def reload(self) -> dict[str, Any]:
        """Re-read the config file and environment; apply it; re-sync the registry."""
        config = load_config(self.config.source, os.environ)
        configure_logging(config.log.level, config.log.format, config.log.file)
        self.config = config
        await self.publish_rules()
        self.supervisor.update_config(config)
        await self.supervisor.sync()
        log.info("daemon.reloaded", source=str(config.source) if config.source else None)
        return {"reloaded": True, "source": str(config.source) if config.source else None}
