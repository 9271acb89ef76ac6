"""PostgresMailStore: the MailStore on a PostgreSQL database, for teams across machines.

Assembled like the SQLite store, one mixin per seam of the ``MailStore`` ABC — the seams written
once over the connector (``StoreMessages``, ``StoreProcs``, ``StoreTokens``, ``StoreTrust``,
``StoreQueues``, ``StoreHistory``, ``StoreAgents``, ``StoreRuleState``, ``StoreDeliveries``) —
over the connection and transactions of ``postgres_tx``; the schema is ``sql/migrations/pg_N.sql``
with the server functions of ``sql/functions.sql`` (migrated by ``postgres_migrate``), the SQL is
``sql/queries.sql`` overlaid with ``sql/dialect/postgres.sql``.
"""

from __future__ import annotations

import psycopg

from agentmaild.errors import StoreError
from agentmaild.store.agents import StoreAgents
from agentmaild.store.base import MailStore
from agentmaild.store.deliveries import StoreDeliveries
from agentmaild.store.history import StoreHistory
from agentmaild.store.location import StoreLocation
from agentmaild.store.messages import StoreMessages
from agentmaild.store.postgres_migrate import PG_SCHEMA_VERSION, current_version, migrate
from agentmaild.store.postgres_tx import (
    Conn,
    PostgresTransactions,
    connect,
    open_pool,
    redacted,
)
from agentmaild.store.procs import StoreProcs
from agentmaild.store.queues import StoreQueues
from agentmaild.store.rule_state import StoreRuleState
from agentmaild.store.tokens import StoreTokens
from agentmaild.store.trust import StoreTrust
from agentmaild.store.usage import StoreUsage

__all__ = ["PostgresMailStore"]


class PostgresMailStore(
    PostgresTransactions,
    StoreMessages,
    StoreAgents,
    StoreDeliveries,
    StoreHistory,
    StoreProcs,
    StoreTokens,
    StoreTrust,
    StoreRuleState,
    StoreQueues,
    StoreUsage,
    MailStore,
):
    """One connection, used from one thread at a time (the daemon's ``AsyncMailStore`` sees to
    that). ``readonly``: never migrates — a database without the schema is an error.
    ``overstory`` stays None: Overstory mode is SQLite-only."""

    def __init__(
        self, dsn: str, *, readonly: bool = False, create: bool = True, pool_size: int = 0
    ) -> None:
        """``pool_size`` > 0 (the daemon's ``[store] pg_pool_size``): operations take their
        connections from a pool of that many, and may be called from several threads at once."""
        self.dsn = dsn
        self.location = StoreLocation.of(dsn)
        self.drained = set()
        self.deferred = {}
        self.path = redacted(dsn)  # what messages and `status` show for "where the store is"
        try:
            self._conn = connect(dsn)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {_short(exc, dsn)}") from exc
        try:
            self._prepare(readonly=readonly or not create)
            if pool_size > 0:
                self._pool = open_pool(dsn, pool_size)
        except BaseException:
            self._conn.close()
            raise

    def _prepare(self, *, readonly: bool) -> None:
        try:
            if not readonly:
                migrate(self._conn)
                return
            version = current_version(self._conn)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {_short(exc, self.dsn)}") from exc
        if version < PG_SCHEMA_VERSION:
            migrate_hint = "run any write command (e.g. `agentmaild agents list` after `serve`)"
            if version == 0:
                raise StoreError(
                    f"no agentmaild store in {self.path}: this command never creates one; "
                    "create it with `agentmaild agents add` or `agentmaild send`"
                )
            raise StoreError(f"store {self.path} has an old schema; {migrate_hint}")

    @property
    def connection(self) -> Conn:
        return self._conn

    def change_mark(self) -> object:
        from agentmaild.store.marks import POSTGRES_MARK, postgres_mark

        return postgres_mark(self._read(POSTGRES_MARK)[0])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self._conn.close()


def _short(exc: BaseException, dsn: str) -> str:
    """The first line of a driver error, without the DSN's password (libpq may quote it)."""
    from agentmaild.store.redaction import scrub

    return scrub((str(exc).strip().splitlines() or [type(exc).__name__])[0], dsn)
