"""The one place a store's kind becomes code: the class that opens a location, the checks it gets.

``StoreLocation`` (``store.location``) is the value callers hold; this module is what turns it
into a store. It is apart from ``location`` so that the stores, which carry their location, never
import what imports them (each class still loads only when its kind is opened).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentmaild.store.location import MEMORY, POSTGRES, StoreLocation

if TYPE_CHECKING:
    from agentmaild.store.base import MailStore
    from agentmaild.store.check import CheckReport


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
        from agentmaild.store.check_pg import check_pg_store

        return check_pg_store(location.target, full=full)
    from agentmaild.store.check import check_store
    from agentmaild.store.files import resolved

    return check_store(resolved(location.local_path), full=full)


def recovery_hint(report: CheckReport) -> str:
    """What to do about a store ``check_integrity`` found damaged."""
    if report.engine == "postgresql":
        from agentmaild.store.check_pg import PG_RECOVERY_HINT

        return PG_RECOVERY_HINT
    from agentmaild.store.check import RECOVERY_HINT

    return RECOVERY_HINT
