"""A PostgreSQL store's daemon services for one host: the host lock, the heartbeat, the lock
keeper, LISTEN/NOTIFY wakes, the ``xmax`` poll gate and the outages record.

The one-daemon lock is an advisory lock per host (``postgres_lock``: it holds across machines;
each host's daemon delivers to that host's agents and beats its ``am_hosts`` row,
``postgres_hosts``); it outlives a database restart, its session checked every beat
(``postgres_outages.PgLockKeeper``). Sends wake the loops through LISTEN/NOTIFY (``store.wake``;
polling stays the fallback). The daemon's local files — control socket, agent logs — live in the
store's stand-in directory on this machine (``StoreLocation.local_path``). There is no file to
check, watch or checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import anyio.to_thread

from agentmaild.config import Config
from agentmaild.config.sections import daemon_host
from agentmaild.store.aio import AsyncMailStore, Gate
from agentmaild.store.aio_postgres import PgAsyncMailStore, PgPollGate
from agentmaild.store.files import check_private_dir, make_store_dir
from agentmaild.store.location import StoreLocation
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_hosts import PgHeartbeat
from agentmaild.store.postgres_listen import NotifyWakes
from agentmaild.store.postgres_lock import PgHostLock, hold_pg_lock
from agentmaild.store.postgres_outages import Outages, PgLockKeeper
from agentmaild.store.services import DaemonServices
from agentmaild.store.wake import Wakes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmaild.store.services import Served


class PgServices(DaemonServices):
    """The services of this host's daemon of the PostgreSQL store ``location`` names."""

    facade: Any = PgAsyncMailStore  # the async store's class (a benchmark stamps its calls)

    def __init__(self, location: StoreLocation, config: Config) -> None:
        super().__init__(location, config, location.local_path)
        self.dsn = location.target
        self.host = daemon_host(config.daemon)
        self.outages = Outages()  # `status` shows them
        self._wakes = NotifyWakes(self.dsn, self.outages)
        self._lock: PgHostLock | None = None

    @property
    def wakes(self) -> Wakes:
        return self._wakes

    @contextmanager
    def hold(self) -> Iterator[None]:
        make_store_dir(self.path.parent)
        check_private_dir(self.path.parent)
        with hold_pg_lock(self.dsn, self.host or "") as lock:
            self._lock = lock
            try:
                yield
            finally:
                self._lock = None

    async def open_store(self) -> AsyncMailStore:
        size = self.config.store.pg_pool_size
        store = await anyio.to_thread.run_sync(
            lambda: PostgresMailStore(self.dsn, pool_size=size)
        )
        facade: AsyncMailStore = self.facade(store, concurrency=size)
        return facade

    async def open_gate(self) -> Gate:
        return await PgPollGate.open(self.dsn)

    def tasks(self, daemon: Served) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        beat = PgHeartbeat(self.dsn, self.host or "", self.config.daemon.lease_s)
        tasks = [beat.run]
        if self._lock is not None:  # the host lock outlives a database restart: kept each beat
            keeper = PgLockKeeper(self._lock, self.outages, beat.interval_s,
                                  daemon.request_shutdown)
            tasks.append(keeper.run)
        return tasks
