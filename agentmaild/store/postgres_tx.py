"""The PostgreSQL store's transaction plumbing: one connection, one transaction per operation.

``PostgresTransactions`` is the base of the store's operation mixins (messages, agents,
deliveries, procs, history). Writes run in one ``READ COMMITTED`` transaction each and are
retried on a deadlock or serialization failure (the transaction rolled back whole, so a retry
is safe); every psycopg error leaves as a ``StoreError``. A connection the server dropped is
replaced on the next operation, never silently inside one (a write whose commit was lost in
flight must not be replayed blindly).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from agentmaild.errors import AgentmaildError, StoreError
from agentmaild.store.connector import (
    Connector,
    Duplicate,
    OverConnector,
    Params,
    Tx,
    lock_names,
    notify_payload,
)
from agentmaild.store.connector import Row as AnyRow
from agentmaild.store.queries import queries_for

if TYPE_CHECKING:  # psycopg_pool loads only in the daemon (hooks and the CLI open no pool)
    from psycopg_pool import ConnectionPool

T = TypeVar("T")
Row = dict[str, Any]


class PgConnection(psycopg.Connection[Row]):
    """psycopg's connection with one cursor kept for the store's one-statement calls (a send, a
    claim, an ack): a cursor made per call costs several percent of a send here. Only for calls
    that read their one result before the next statement (not inside a pipeline, whose results
    each stay with their own cursor)."""

    _kept: psycopg.Cursor[Row] | None = None

    def kept_cursor(self) -> psycopg.Cursor[Row]:
        if self._kept is None or self._kept.closed:
            self._kept = self.cursor()
        return self._kept


Conn = PgConnection

# sql/queries.sql overlaid with sql/dialect/postgres.sql, in psycopg's placeholders.
PQ = queries_for("postgres")

_RETRY_DEADLINE_S = 30.0
_RETRYABLE = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)


def connect(dsn: str) -> Conn:
    """A connection in autocommit mode (transactions are opened explicitly) returning dicts."""
    return PgConnection.connect(
        dsn, autocommit=True, row_factory=dict_row, application_name="agentmaild"
    )


def redacted(dsn: str) -> str:
    """The DSN for messages: without its password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    where = f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}"
    return f"postgresql://{info.get('user') or ''}@{where}/{info.get('dbname') or ''}"


def open_pool(dsn: str, size: int) -> ConnectionPool[Conn]:
    """The daemon's pool: ``size`` connections like ``connect``'s. A connection the server
    dropped fails the call it was lent to (as the single connection does: a write whose commit
    was lost in flight is not replayed blindly) and is discarded when it comes back; the pool
    opens a new one. Not checked before each use: that would cost every claim a round trip."""
    from psycopg_pool import ConnectionPool

    return ConnectionPool(
        dsn, min_size=1, max_size=size, open=True,
        kwargs={"autocommit": True, "row_factory": dict_row, "application_name": "agentmaild"},
        connection_class=PgConnection, name="agentmaild",
    )


class PostgresTransactions(OverConnector):
    """Owns the connection (or the pool); ``_write`` and ``_read_with`` run one operation on it.

    With a pool, each operation takes a connection of its own; without, one thread at a time."""

    _conn: Conn
    _pool: ConnectionPool[Conn] | None = None
    dsn: str
    _connector: PostgresConnector | None = None

    @property
    def db(self) -> Connector:
        if self._connector is None:
            self._connector = PostgresConnector(self)
        return self._connector

    @contextmanager
    def _lease(self) -> Iterator[Conn]:
        if self._pool is None:
            yield self._connection()
            return
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection(timeout=_RETRY_DEADLINE_S) as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreError(f"cannot reach store {redacted(self.dsn)}: {exc}") from exc

    def _connection(self) -> Conn:
        if self._conn.closed or self._conn.broken:
            try:
                self._conn = connect(self.dsn)
            except psycopg.Error as exc:
                raise StoreError(f"cannot reach store {redacted(self.dsn)}: {exc}") from exc
        return self._conn

    def _write(
        self, fn: Callable[[Conn], T], *, pipeline: bool = False, single: bool = False
    ) -> T:
        """Run ``fn`` in one transaction, retried on a deadlock or serialization failure.

        ``pipeline``: in psycopg's pipeline mode, so statements whose results ``fn`` does not
        read (locks, inserts, NOTIFY, BEGIN and COMMIT) ride along with the next one it does:
        a send is a few round trips instead of one per statement. ``single``: ``fn`` runs one
        statement, which is its own transaction (autocommit): no BEGIN, no COMMIT."""
        deadline = time.monotonic() + _RETRY_DEADLINE_S
        delay = 0.002
        while True:
            try:
                with self._lease() as conn:
                    if pipeline:
                        return _pipelined(conn, fn)
                    if single:
                        return fn(conn)
                    with conn.transaction():
                        return fn(conn)
            except _RETRYABLE:
                if time.monotonic() > deadline:
                    raise StoreError("store write kept failing: deadlock or conflict") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
            except AgentmaildError:
                raise
            except psycopg.Error as exc:
                raise StoreError(f"store write failed: {first_line(exc)}") from exc

    def _read_with(self, fn: Callable[[Conn], T]) -> T:
        try:
            with self._lease() as conn:
                return fn(conn)
        except psycopg.Error as exc:
            raise StoreError(f"store read failed: {first_line(exc)}") from exc

    def _read(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        return self._read_with(lambda conn: conn.execute(sql, params).fetchall())


def _pipelined(conn: Conn, fn: Callable[[Conn], T]) -> T:
    """``fn`` in one transaction in pipeline mode, BEGIN and COMMIT sent as plain statements:
    BEGIN rides with ``fn``'s first read, COMMIT with its last writes (psycopg's ``transaction()``
    would sync on its own before each). Whatever fails — a statement, ``fn`` itself, the COMMIT —
    leaves no transaction open behind it."""
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            result = fn(conn)
            conn.execute("COMMIT")
        return result
    except BaseException:
        if not conn.closed and not conn.broken and (
            conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        ):
            conn.execute("ROLLBACK")
        raise


def one(conn: Conn, sql: str, params: Mapping[str, Any] | None = None) -> Row | None:
    return conn.execute(sql, params).fetchone()


def lock(conn: Conn, *keys: str) -> None:
    """Take transaction-scoped advisory locks on ``keys``, in one order (no deadlock), in one
    statement."""
    names = lock_names(keys)
    if len(names) == 1:
        conn.execute(PQ["lock_key"], {"key": names[0]})
    elif names:
        conn.execute(PQ["lock_keys"], {"keys": names})


def first_line(exc: psycopg.Error) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PgTx(Tx):
    """A transaction (or read) on one connection: ``PQ``'s text, psycopg's placeholders."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    def execute(self, name: str, params: Params | None = None) -> int:
        try:
            return self._conn.execute(PQ[name], params).rowcount
        except pg_errors.UniqueViolation as exc:
            raise Duplicate(f"store write refused: {first_line(exc)}") from exc

    def execute_many(self, name: str, rows: Iterable[Params]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(PQ[name], rows)

    def fetch_one(self, name: str, params: Params | None = None) -> AnyRow | None:
        return self._conn.execute(PQ[name], params).fetchone()

    def fetch_all(self, name: str, params: Params | None = None) -> list[AnyRow]:
        return list(self._conn.execute(PQ[name], params).fetchall())

    def prefetch(self, name: str, params: Params | None = None) -> Callable[[], AnyRow | None]:
        return self._conn.execute(PQ[name], params).fetchone

    def insert_row(self, name: str, params: Params | None = None) -> int | None:
        self.execute(name, params)
        return None

    def savepoint(self, fn: Callable[[Tx], object]) -> str | None:
        try:
            with self._conn.transaction():  # nested: a savepoint
                fn(self)
        except (psycopg.Error, Duplicate) as exc:
            return str(exc)
        return None

    def json(self, value: object) -> object:
        return Jsonb(value)

    def array(self, values: Iterable[str]) -> object:
        return list(values)

    def from_json(self, raw: Any) -> Any:
        return raw  # jsonb arrives decoded

    def lock(self, *keys: str) -> None:
        lock(self._conn, *keys)

    def notify(self, recipients: Iterable[str]) -> None:
        payload = notify_payload(recipients)
        if payload:
            self._conn.execute(PQ["notify_mail"], {"recipients": payload})


class PostgresConnector(Connector):
    """The connector over ``PostgresTransactions``: its connection or pool, its retried
    transactions, pipeline mode, single autocommit statements and its error mapping."""

    dialect = "postgres"

    def __init__(self, owner: PostgresTransactions) -> None:
        self._owner = owner

    def write(
        self, fn: Callable[[Tx], T], *, pipeline: bool = False, single: bool = False
    ) -> T:
        return self._owner._write(lambda conn: fn(PgTx(conn)), pipeline=pipeline, single=single)

    def read(self, fn: Callable[[Tx], T]) -> T:
        return self._owner._read_with(lambda conn: fn(PgTx(conn)))

    def offers(self, name: str) -> bool:
        return name in PQ

    def single(self, name: str, params: Params | None = None) -> AnyRow | None:
        return self._owner._write(
            lambda conn: conn.kept_cursor().execute(PQ[name], params).fetchone(), single=True
        )

    def one_statement(self, name: str) -> Callable[[Params], list[AnyRow]] | None:
        if not self.offers(name):  # claim_one, ack_one: am_claim, am_ack (sql/functions.sql)
            return None
        sql = PQ[name]  # run on the kept cursor, like ``single``: a cursor per call costs a lot
        return lambda params: self._owner._write(
            lambda conn: list(conn.kept_cursor().execute(sql, params).fetchall()), single=True
        )
