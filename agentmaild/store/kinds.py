"""The one place a store's kind becomes code: the class that opens a location, the checks it gets.

``StoreLocation`` (``store.location``) is the value callers hold; this module is what turns it
into a store. It is apart from ``location`` so that the stores, which carry their location, never
import what imports them (each class still loads only when its kind is opened).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentmaild.store.location import MEMORY, POSTGRES, SQLITE, StoreLocation

if TYPE_CHECKING:  # the hooks' cold path imports this module: nothing more at run time
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from pathlib import Path

    from agentmaild.config import Config
    from agentmaild.store.base import MailStore
    from agentmaild.store.check import CheckReport
    from agentmaild.store.ports import Port
    from agentmaild.store.reader import Reader
    from agentmaild.store.services import DaemonServices
    from agentmaild.store.wake import Wakes


def open_store(
    location: StoreLocation, *, readonly: bool = False, create: bool = True,
    flavor: str | None = None, pool_size: int = 0,
) -> MailStore:  # fmt: skip
    """The store at ``location``. ``readonly`` never writes nor creates; ``create=False``
    refuses a missing store; ``flavor`` is ``[store] flavor`` (a file store's Overstory mode);
    ``pool_size`` > 0 gives a server's store a connection pool (the daemon's)."""
    create = create and not readonly
    if location.kind == POSTGRES:
        from agentmaild.store.postgres import PostgresMailStore

        return PostgresMailStore(
            location.target, readonly=readonly, create=create, pool_size=pool_size
        )
    if location.kind == MEMORY:
        from agentmaild.store.memory import MemoryMailStore

        return MemoryMailStore()
    from agentmaild.store.sqlite import SqliteMailStore

    return SqliteMailStore(location.target, readonly=readonly, create=create, flavor=flavor)


def check_integrity(location: StoreLocation, *, full: bool = False) -> CheckReport:
    """``store check``: a file's SQLite checks or a server's schema checks, then the
    cross-table checks (read-only)."""
    if location.kind == POSTGRES:
        from agentmaild.store.check_postgres import check_pg_store

        return check_pg_store(location.target, full=full)
    from agentmaild.store.check import check_store
    from agentmaild.store.files import resolved

    return check_store(resolved(location.local_path), full=full)


def recovery_hint(report: CheckReport) -> str:
    """What to do about a store ``check_integrity`` found damaged."""
    if report.engine == "postgresql":
        from agentmaild.store.check_postgres import PG_RECOVERY_HINT

        return PG_RECOVERY_HINT
    from agentmaild.store.check import RECOVERY_HINT

    return RECOVERY_HINT


# -- what a caller asks of its store, chosen by kind ------------------------------------------
def open_port(
    location: StoreLocation, on_wake: Callable[[str, str], None] | None = None
) -> Port | None:
    """A port on its own connection to the store at ``location``; None when there is no store.

    ``on_wake(local, agent)``: how a write's ``wake`` reaches the daemon when the store has no
    notification channel of its own (SQLite's control socket; PostgreSQL NOTIFYs instead)."""
    if location.kind == SQLITE:
        from agentmaild.store.port_sqlite import SqlitePort

        return SqlitePort.open(location.target, on_wake)
    from agentmaild.store.port_postgres import PostgresPort

    return PostgresPort.open(location)


def port_of(store: Any) -> AbstractContextManager[Port]:
    """A port lent on the open ``store``'s own connection (a pooled one for PostgreSQL). Its
    ``wake`` reaches only the daemons the store itself notifies (PostgreSQL's NOTIFY), never
    this process's control socket: the caller (the daemon) wakes its own loop."""
    from contextlib import contextmanager

    @contextmanager
    def lend() -> Iterator[Port]:
        if store.location.kind == SQLITE:
            from agentmaild.store.port_sqlite import SqlitePort

            yield SqlitePort(store.connection, store.location.target)
            return
        from agentmaild.store.port_postgres import lend_port

        with lend_port(store) as port:
            yield port

    return lend()


def open_services(location: StoreLocation, config: Config) -> DaemonServices:
    """The daemon's services for ``location``: the one place a daemon's backend is chosen."""
    if location.kind == POSTGRES:
        from agentmaild.store.services_postgres import PgServices

        return PgServices(location, config)
    from agentmaild.store.services_sqlite import SqliteServices

    return SqliteServices(location, config)


def wakes_for(location: StoreLocation, socket: Path | str | None = None) -> Wakes:
    """A sender's wake-ups for ``location`` (``socket``: the daemon's control socket when
    configured, else the one beside the store's local path)."""
    if location.kind == POSTGRES:
        from agentmaild.store.postgres_listen import NotifyWakes

        return NotifyWakes(location.target)
    from pathlib import Path

    from agentmaild.control.protocol import socket_path_for
    from agentmaild.store.wake import DatagramWakes

    return DatagramWakes(Path(socket) if socket else socket_path_for(location.local_path))


def host_daemons(location: StoreLocation) -> list[dict[str, Any]] | None:
    """Every host's daemon of a store shared by hosts, as ``status`` shows them; None for a store
    served by one daemon, or when the store cannot be read."""
    if location.kind != POSTGRES:
        return None
    from agentmaild.store.postgres_hosts import read_hosts

    return read_hosts(location.target)


def open_reader(store: MailStore) -> Reader:
    """The dashboard's reader of the open ``store`` (its connection opens on the first read)."""
    location = store.location
    if location.kind == SQLITE:
        from agentmaild.store.reader_sqlite import SqliteReader

        return SqliteReader(location.local_path)
    if location.kind == POSTGRES:
        from agentmaild.store.reader_postgres import PostgresReader

        return PostgresReader(location.target)
    from agentmaild.errors import StoreError

    raise StoreError(f"this store offers no dashboard reader: {type(store).__name__}")
