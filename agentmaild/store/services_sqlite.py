"""A store file's daemon services: the file lock, the file's checks, the poll gate, datagram
wakes, the WAL checkpointer and the watch that the store's path still names the file opened.

Before anything touches the store: its directory must not be writable by other users, the lock
(named from the store's resolved path) must be ours, the file must have one hard link and pass
``PRAGMA quick_check``. While serving, the watch checks once a tick that the path still names the
file the daemon opened; when it was replaced or deleted the daemon stops at once, and ``abandon``
empties the WAL into the file it opened (SQLite finds the WAL by *name*: left behind, its frames
would be replayed into whatever file now has the store's name).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import structlog

from agentmaild.config import Config
from agentmaild.store.aio import AsyncMailStore, Gate, PollGate
from agentmaild.store.check import refuse_damaged
from agentmaild.store.checkpoints import Checkpointer, empty_wal
from agentmaild.store.file_lock import hold_lock
from agentmaild.store.files import (
    FileIdentity,
    check_private_dir,
    identity,
    make_store_dir,
    refuse_hard_links,
    resolved,
)
from agentmaild.store.location import StoreLocation
from agentmaild.store.services import DaemonServices
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.store.wake import DatagramWakes, Wakes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmaild.store.services import Served

log = structlog.get_logger(__name__)

WATCH_TICK_S = 1.0


class SqliteServices(DaemonServices):
    """The services of the daemon of the store file ``location`` names."""

    facade: Any = AsyncMailStore  # the async store's class (a benchmark stamps its calls)

    def __init__(self, location: StoreLocation, config: Config) -> None:
        self.given = Path(location.target).absolute()  # the path as named: what the watch stats
        real = resolved(self.given)
        # Agents and channels name the resolved file (their AGENTMAIL_DB, their cwd may differ).
        super().__init__(StoreLocation.of(real), config, real)
        self._wakes = DatagramWakes(self.socket)
        self._opened: FileIdentity | None = None

    @property
    def target(self) -> str:
        return str(self.path)  # agents name the resolved file (channels: AGENTMAIL_DB)

    @property
    def wakes(self) -> Wakes:
        return self._wakes

    @contextmanager
    def hold(self) -> Iterator[None]:
        make_store_dir(self.path.parent)
        check_private_dir(self.path.parent)
        with hold_lock(self.path):
            refuse_hard_links(self.path)
            if self.config.daemon.quick_check:
                refuse_damaged(self.path)
            yield

    async def open_store(self) -> AsyncMailStore:
        store = SqliteMailStore(self.path, flavor=self.config.store.flavor)
        self._opened = identity(self.path)
        facade: AsyncMailStore = self.facade(store, inline_writes=True)
        return facade

    async def open_gate(self) -> Gate:
        return await PollGate.open(self.path)

    def tasks(self, daemon: Served) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        checkpointer = Checkpointer(
            self.path, daemon.store, lambda: daemon.config.daemon, daemon.shutdown_event
        )
        return [checkpointer.run, partial(self._watch, daemon)]

    async def _watch(self, daemon: Served) -> None:
        """One ``stat`` a tick: a store replaced (``mv backup.db mail.db``) or deleted under us
        stops the daemon, so a supervisor restarts it on whatever the path names now."""
        opened, stop = self._opened, daemon.shutdown_event
        if opened is None:
            return
        while not stop.is_set():
            with anyio.move_on_after(WATCH_TICK_S):
                await stop.wait()
            try:
                now = identity(self.given)
            except OSError as exc:  # cannot tell (a directory's permissions): keep serving
                log.warning("daemon.store_unverified", db=str(self.given), error=str(exc))
                continue
            if now == opened or stop.is_set():
                continue
            event = "daemon.store_deleted" if now is None else "daemon.store_replaced"
            log.critical(event, db=str(self.given), opened_inode=opened.ino,
                         now_inode=now.ino if now is not None else None)
            daemon.lose_store("deleted" if now is None else "replaced")
            return

    async def abandon(self, store: AsyncMailStore) -> None:
        with anyio.CancelScope(shield=True):
            emptied = await store.run_sync(empty_wal, store.sync)
        if not emptied:
            log.critical("daemon.wal_not_emptied", db=str(self.path),
                         hint="stop every process using the store before opening it again")
