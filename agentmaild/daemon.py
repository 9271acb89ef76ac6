"""serve(): lock → store → recovery → task group(control server, signals, supervisor, checkpoints).

Shutdown is deadline-bounded: the first SIGTERM/SIGINT (or ``shutdown`` on the socket) stops new
claims and lets deliveries in flight finish within ``shutdown_grace_s``; what is left is cancelled
and released. A second signal cancels at once. SIGHUP reloads the config. Signals become events in
exactly one task (``_signals``).
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
from agentmaild.errors import AgentmaildError, ControlError
from agentmaild.ids import iso_now, new_id
from agentmaild.log import configure_logging
from agentmaild.mail import DAEMON_SENDER, OPERATOR, Mailer
from agentmaild.models import Agent, ChannelKind, Message
from agentmaild.store.aio import AsyncMailStore, PollGate
from agentmaild.store.base import InsertRequest
from agentmaild.store.sqlite import SqliteMailStore, connect
from agentmaild.supervisor import Supervisor

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


@contextmanager
def hold_lock(db: Path) -> Iterator[None]:
    """``<db>.lock``, flock'ed for the daemon's lifetime, with our pid inside."""
    path = db.with_name(db.name + ".lock")
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # non-inheritable: children never hold it
    except OSError as exc:
        raise ControlError(f"cannot open lock file {path}: {exc.strerror or exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise ControlError(f"agentmaild is already running for {db} (pid {pid})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


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


async def recover(store: AsyncMailStore) -> dict[str, Any]:
    """Before any loop runs: re-queue every claim (its daemon is gone), reset owned busy agents,
    and tell each interrupted agent's parent (else the operator) in one mail."""
    # We hold the lock, so every claim belongs to a dead daemon, however long its lease.
    reaped = await store.reap_expired(now=time.time(), everything=True)
    agents = {a.name: a for a in await store.list_agents()}
    reset = [
        a.name for a in agents.values() if a.turn_state == "busy" and a.channel in _OWNED_CHANNELS
    ]
    for name in reset:
        await store.update_agent(name, {"turn_state": None})
    interrupted: dict[str, list[str]] = {}
    for delivery_id, agent in reaped:
        interrupted.setdefault(agent, []).append(f"delivery {delivery_id} re-queued")
    for name in reset:
        interrupted.setdefault(name, []).append("turn state was busy; reset")
    if interrupted:
        await store.run_sync(_report_interrupted, store.sync, agents, interrupted)
    log.info("daemon.recovered", requeued=len(reaped), reset_busy=len(reset),
             interrupted=sorted(interrupted))
    return {"requeued": reaped, "reset": reset}


def _report_interrupted(
    sync_store: Any, agents: dict[str, Agent], interrupted: dict[str, list[str]]
) -> None:
    by_parent: dict[str, list[str]] = {}
    for name, what in sorted(interrupted.items()):
        agent = agents.get(name)
        parent = agent.parent if agent is not None and agent.parent else OPERATOR
        by_parent.setdefault(parent, []).extend(f"- {name}: {item}" for item in what)
    now = time.time()
    for parent, lines in by_parent.items():
        count = len({line.split(":", 1)[0] for line in lines})
        report = Message(
            id=new_id("msg"), from_agent=DAEMON_SENDER, to_agent=parent,
            subject=f"agentmaild restarted: {count} agent(s) were interrupted",
            body="The previous agentmaild stopped without shutting down cleanly. Interrupted:\n"
            + "\n".join(lines)
            + "\nRe-queued batches are redelivered with their original delivery ids.",
            type="status", priority="high", created_at=iso_now(now),
        )
        sync_store.insert(InsertRequest(messages=(report,), now=now,
                                        nudges=((parent, report.id, "high status"),)))


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
            tg.start_soon(self._checkpoints)
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

    # -- WAL checkpoints --------------------------------------------------------------------
    async def _checkpoints(self) -> None:
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
                daemon = self.config.daemon
                tick = min(_CHECKPOINT_TICK_S, daemon.checkpoint_interval_s)
                # A large WAL whose TRUNCATE lost the race to a writer is retried at once-ish:
                # under sustained load the WAL would otherwise grow for another whole tick.
                with anyio.move_on_after(_CHECKPOINT_RETRY_S if retry_soon else tick):
                    await self._shutdown.wait()
                size = _file_size(wal)
                large = size > daemon.wal_checkpoint_pages * page_size
                if not (large or time.monotonic() - last >= daemon.checkpoint_interval_s):
                    continue
                last = time.monotonic()
                mode = "TRUNCATE" if large else "PASSIVE"
                busy = await anyio.to_thread.run_sync(_checkpoint, conn, mode, limiter=limiter)
                retry_soon = busy and large
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
    """Run one checkpoint; True when it could not finish (readers or a writer were in the way)."""
    if mode == "TRUNCATE":
        # Waiting long here would stall writers behind us; a busy TRUNCATE just retries later.
        conn.execute(f"PRAGMA busy_timeout = {_TRUNCATE_BUSY_TIMEOUT_MS}")
    try:
        busy, frames, done = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
    except Exception as exc:  # sqlite3.Error: a checkpoint is an optimisation, never fatal
        log.warning("daemon.checkpoint_failed", mode=mode, error=str(exc))
        return True
    finally:
        conn.execute("PRAGMA busy_timeout = 5000")
    log.debug("daemon.checkpointed", mode=mode, busy=busy, frames=frames, checkpointed=done)
    return bool(busy)
