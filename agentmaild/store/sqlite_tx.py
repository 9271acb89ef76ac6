"""The SQLite store's transaction plumbing: busy retries, BEGIN IMMEDIATE writes, mapped errors.

``SqliteTransactions`` is the base shared by the store's operation mixins (messages, agents,
deliveries); ``SqliteMailStore`` opens the connection it runs on. ``SqliteConnector`` is the
``connector.Connector`` over the same plumbing, for the seams written once.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from agentmaild.errors import StoreError
from agentmaild.store.connector import Connector, Duplicate, OverConnector, Params, Row, Tx
from agentmaild.store.notnow import NOT_NOW
from agentmaild.store.queries import Q
from agentmaild.store.sqlite_group import Group, run_group

if TYPE_CHECKING:
    from agentmaild.store.hops import Runnable

T = TypeVar("T")

# How long a writer keeps retrying SQLITE_BUSY beyond SQLite's own busy_timeout.
_BUSY_DEADLINE_S = 30.0
BUSY_TIMEOUT_MS = 5000  # what sqlite.py sets; see ``_busy_polled``
# BEGIN IMMEDIATE polls the write lock this often, growing to the cap (see ``_begin``).
_EAGER_FIRST_S, _EAGER_MAX_S = 0.0001, 0.002


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


class WouldWait(Exception):
    """An inline write (``run_inline``) met a lock it would have to wait for; nothing was done."""


class SqliteTransactions(OverConnector):
    """One connection; each write is one short ``BEGIN IMMEDIATE … COMMIT``, retried while busy."""

    _conn: sqlite3.Connection
    # ``overstory.link.OverstoryLink`` in Overstory mode: told of nudges and acks after commit.
    overstory: Any = None

    # busy_timeout is 0 on our connection while it is ours alone: writers poll (``_begin``) and
    # reads retry (``_retrying``); ``SqliteMailStore.connection`` puts 5000 back for its users.
    _busy_polled = False
    _grouped: Group | None = None  # while ``run_grouped`` runs: the writes join its transaction
    _nowait = False  # while ``run_inline`` runs: a busy lock raises WouldWait instead of a wait
    # An inline write is not tried while the WAL is past this size: its COMMIT could start a
    # checkpoint (``wal_autocheckpoint``), which is no work for the event loop's thread.
    _inline_wal_max = 0

    _connector: SqliteConnector | None = None

    @property
    def db(self) -> Connector:
        if self._connector is None:
            self._connector = SqliteConnector(self)
        return self._connector

    def run_inline(self, fn: Callable[[], T]) -> T:
        """``fn`` (one store call of a single write) now, in the caller's thread, if it needs no
        wait: when a write lock another holds (or a large WAL) would make it wait, it returns
        ``NOT_NOW`` with nothing written, and the caller runs ``fn`` in the store's thread
        as ever. See ``store.hops``."""
        if self._grouped is not None or self._wal_large():
            return NOT_NOW  # type: ignore[no-any-return]
        self._nowait = True
        try:
            return fn()
        except WouldWait:
            return NOT_NOW  # type: ignore[no-any-return]
        finally:
            self._nowait = False

    def _wal_large(self) -> bool:
        return False

    def run_grouped(self, calls: Sequence[Runnable]) -> None:
        """Run ``calls`` (store calls that never raise) in one transaction; when that fails as a
        whole, each again in its own (``store.sqlite_group``)."""
        if self._grouped is None and run_group(
            self._conn, calls, begin=self._begin, enter=self._enter
        ):
            return
        for call in calls:
            call.reset()
            call.run()

    def _enter(self, group: Group | None) -> None:
        self._grouped = group

    def after_commit(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` once the current write is committed: now, or after its group's COMMIT."""
        if self._grouped is not None:
            self._grouped.after.append(fn)
        else:
            fn()

    def _begin(self, conn: sqlite3.Connection) -> None:
        """BEGIN IMMEDIATE, polling the write lock every fraction of a millisecond (growing to
        2 ms) instead of sleeping in SQLite's busy handler (1, 2, 5, … 100 ms): writers that
        commit back to back (the daemon's claims and acks, a stream of sends) take turns instead
        of one of them sleeping through the gaps the others leave (issue 15)."""
        if not self._busy_polled:
            conn.execute("PRAGMA busy_timeout = 0")  # once, not twice a write
            self._busy_polled = True
        deadline = time.monotonic() + _BUSY_DEADLINE_S + BUSY_TIMEOUT_MS / 1000
        delay = _EAGER_FIRST_S
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                if self._nowait:
                    raise WouldWait from exc
            time.sleep(delay)
            delay = min(delay * 1.5, _EAGER_MAX_S)

    def _lend(self) -> sqlite3.Connection:
        """The connection for code that runs its own statements: SQLite's busy wait restored."""
        if self._busy_polled:
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._busy_polled = False
        return self._conn

    def _retrying(self, fn: Callable[[], T]) -> T:
        deadline = time.monotonic() + _BUSY_DEADLINE_S
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                if self._nowait:
                    raise WouldWait from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        self._begin(conn)
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._grouped is not None:
            return self._grouped.write(fn)

        def attempt() -> T:
            with self._tx() as conn:
                return fn(conn)

        try:
            return self._retrying(attempt)
        except sqlite3.Error as exc:
            raise StoreError(f"store write failed: {exc}") from exc

    def _read_with(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read outside any write transaction (autocommit), busy-retried, errors mapped; in a
        group, inside its transaction."""
        if self._grouped is not None:
            return self._grouped.read(fn)
        try:
            return self._retrying(lambda: fn(self._conn))
        except sqlite3.Error as exc:
            raise StoreError(f"store read failed: {exc}") from exc

    def _read(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        return self._read_with(lambda conn: conn.execute(sql, params).fetchall())


class SqliteTx(Tx):
    """A transaction (or read) on the store's connection: ``Q``'s text as it is."""

    __slots__ = ("_conn",)
    serialised = True

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, name: str, params: Params | None = None) -> int:
        try:
            return self._conn.execute(Q[name], params or {}).rowcount
        except sqlite3.IntegrityError as exc:
            raise Duplicate(f"store write refused: {exc}") from exc

    def execute_many(self, name: str, rows: Iterable[Params]) -> None:
        self._conn.executemany(Q[name], rows)

    def fetch_one(self, name: str, params: Params | None = None) -> Row | None:
        row: Row | None = self._conn.execute(Q[name], params or {}).fetchone()
        return row

    def fetch_all(self, name: str, params: Params | None = None) -> list[Row]:
        return list(self._conn.execute(Q[name], params or {}).fetchall())

    def prefetch(self, name: str, params: Params | None = None) -> Callable[[], Row | None]:
        row = self.fetch_one(name, params)
        return lambda: row

    def insert_row(self, name: str, params: Params | None = None) -> int | None:
        return self._conn.execute(Q[name], params or {}).lastrowid

    def savepoint(self, fn: Callable[[Tx], object]) -> str | None:
        self._conn.execute("SAVEPOINT am_part")
        try:
            fn(self)
        except (sqlite3.Error, Duplicate) as exc:
            self._conn.execute("ROLLBACK TO am_part")
            self._conn.execute("RELEASE am_part")
            return str(exc)
        self._conn.execute("RELEASE am_part")
        return None

    def json(self, value: object) -> object:
        return json.dumps(value)

    def array(self, values: Iterable[str]) -> object:
        return json.dumps(list(values))

    def from_json(self, raw: Any) -> Any:
        return json.loads(raw) if raw is not None else None

    def lock(self, *keys: str) -> None:
        return  # BEGIN IMMEDIATE holds the one write lock already

    def notify(self, recipients: Iterable[str]) -> None:
        return  # the caller sends SQLite's wake-up (a datagram), after the commit


class SqliteConnector(Connector):
    """The connector over ``SqliteTransactions``: its busy-polled writes (grouped or inline when
    the store runs them so), its retried reads, its error mapping. ``pipeline`` and ``single``
    mean nothing here: every write is one short transaction of the one writer."""

    dialect = "sqlite"

    def __init__(self, owner: SqliteTransactions) -> None:
        self._owner = owner

    def write(
        self, fn: Callable[[Tx], T], *, pipeline: bool = False, single: bool = False
    ) -> T:
        return self._owner._write(lambda conn: fn(SqliteTx(conn)))

    def read(self, fn: Callable[[Tx], T]) -> T:
        return self._owner._read_with(lambda conn: fn(SqliteTx(conn)))

    def offers(self, name: str) -> bool:
        return name in Q

    def after_commit(self, fn: Callable[[], object]) -> None:
        self._owner.after_commit(fn)
