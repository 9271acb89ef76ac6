"""The thin connector the store's logic runs over: transactions of named queries, locks, wake-ups.

A seam of the store written once (``tokens``, ``procs``, ``trust``) runs over a ``Connector``:
``write(fn)`` runs ``fn`` in one transaction (SQLite: one ``BEGIN IMMEDIATE … COMMIT``, retried
while the file is busy; PostgreSQL: one transaction retried on a deadlock or serialization
failure, or in pipeline mode, or a single autocommit statement), ``read(fn)`` outside any write.
``fn`` gets a ``Tx``: it executes a query *by name* (``sql/queries.sql``, or its dialect's
override) with named parameters, fetches one row or all of them (a row answers ``row["column"]``
on both; JSON columns through ``json``/``from_json``), runs a part in a savepoint, takes
advisory locks in one order (PostgreSQL; SQLite's writer is serialised already)
and asks for a wake-up of the daemons at commit (PostgreSQL's NOTIFY; SQLite's wake-up is sent
by the caller). A driver's error leaves as ``StoreError``, mapped once by the implementation;
a unique key met twice as ``Duplicate``.

The implementations reuse each backend's tuned plumbing: ``sqlite_tx.SqliteConnector`` and
``postgres_tx.PostgresConnector``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from agentmaild.errors import StoreError

T = TypeVar("T")
Params = Mapping[str, Any]


class Row(Protocol):
    """A result row: ``sqlite3.Row`` or psycopg's dict row, both read by column name."""

    def __getitem__(self, key: str, /) -> Any: ...

    def keys(self) -> Collection[str]: ...


class Duplicate(StoreError):
    """A write met a unique key another row holds already (the row was added before)."""


class Tx(ABC):
    """One transaction of a connector (or one read): named queries with named parameters."""

    __slots__ = ()

    # True where the writer is serialised whole and the wake-up is the caller's (SQLite):
    # ``lock`` and ``notify`` do nothing there, and a hot caller may skip building their keys.
    serialised = False

    @abstractmethod
    def execute(self, name: str, params: Params | None = None) -> int:
        """Run the query ``name``; how many rows it changed."""

    @abstractmethod
    def execute_many(self, name: str, rows: Iterable[Params]) -> None:
        """Run the query ``name`` once per parameter set."""

    @abstractmethod
    def fetch_one(self, name: str, params: Params | None = None) -> Row | None:
        """The first row of the query ``name``, or None."""

    @abstractmethod
    def fetch_all(self, name: str, params: Params | None = None) -> list[Row]:
        """Every row of the query ``name``."""

    @abstractmethod
    def prefetch(self, name: str, params: Params | None = None) -> Callable[[], Row | None]:
        """Send the query ``name`` now, read its first row later (call the answer): in a
        pipelined write (PostgreSQL) reads sent together share one round trip; elsewhere the
        query runs at once."""

    @abstractmethod
    def insert_row(self, name: str, params: Params | None = None) -> int | None:
        """Run the insert ``name``; the new row's number where the dialect numbers rows in
        the order written (SQLite's rowid), else None (the result is not waited for)."""

    @abstractmethod
    def savepoint(self, fn: Callable[[Tx], object]) -> str | None:
        """Run ``fn`` inside a savepoint of this transaction: on a driver error, roll back to it
        and return the error's text (the transaction goes on); None when ``fn`` succeeded."""

    @abstractmethod
    def json(self, value: object) -> object:
        """``value`` as a parameter for a JSON column (text on SQLite, jsonb on PostgreSQL)."""

    @abstractmethod
    def array(self, values: Iterable[str]) -> object:
        """``values`` as one parameter holding a list of texts (a JSON array read with
        ``json_each`` on SQLite; a ``text[]`` on PostgreSQL)."""

    @abstractmethod
    def from_json(self, raw: Any) -> Any:
        """A JSON column's value as read (SQLite: its text decoded; PostgreSQL: decoded)."""

    @abstractmethod
    def lock(self, *keys: str) -> None:
        """Transaction-scoped locks on ``keys``, taken in one order. A no-op where the writer is
        serialised whole (SQLite)."""

    @abstractmethod
    def notify(self, recipients: Iterable[str]) -> None:
        """Wake the daemons serving ``recipients`` once this transaction commits. A no-op where
        the wake-up is not the store's (SQLite: the caller sends it)."""


class Connector(ABC):
    """Runs the store's transactions on one backend (``dialect``: ``sqlite`` or ``postgres``)."""

    dialect: str

    @abstractmethod
    def write(
        self, fn: Callable[[Tx], T], *, pipeline: bool = False, single: bool = False
    ) -> T:
        """``fn`` in one write transaction. ``pipeline`` (PostgreSQL): statements whose results
        ``fn`` does not read ride along with the next one it does. ``single``: ``fn`` runs one
        statement, its own transaction (no BEGIN, no COMMIT on PostgreSQL)."""

    @abstractmethod
    def read(self, fn: Callable[[Tx], T]) -> T:
        """``fn`` outside any write transaction."""

    @abstractmethod
    def offers(self, name: str) -> bool:
        """Whether this dialect has the query ``name``: a form only some dialects have (the
        one-statement send ``send_one``, a server-side function) is used where it is offered."""

    def single(self, name: str, params: Params | None = None) -> Row | None:
        """The first row of ``name``, a whole write in one statement, run as its own
        transaction (where the dialect allows: no BEGIN, no COMMIT)."""
        return self.write(lambda tx: tx.fetch_one(name, params), single=True)

    def one_statement(self, name: str) -> Callable[[Params], list[Row]] | None:
        """The dialect's one-statement form of an operation (``claim_one``, ``ack_one``: a
        server-side function doing a whole claim or ack atomically), run as its own transaction
        and answering its rows; None where the dialect has none (the caller runs the general
        form, written once over ``Tx``)."""
        return None

    def after_commit(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` once the write that just returned is committed: now, unless the store
        groups writes into one transaction (SQLite), then after that one's COMMIT."""
        fn()

    def fetch_all(self, name: str, params: Params | None = None) -> list[Row]:
        """Every row of the query ``name``, read on its own."""
        return self.read(lambda tx: tx.fetch_all(name, params))

    def fetch_one(self, name: str, params: Params | None = None) -> Row | None:
        """The first row of the query ``name``, read on its own."""
        return self.read(lambda tx: tx.fetch_one(name, params))


# NOTIFY payloads stop at 8000 bytes; a longer recipient list becomes "*": wake every loop.
NOTIFY_MAX_BYTES = 7900


def lock_names(keys: Iterable[str]) -> list[str]:
    """The lock names of ``keys`` (``Tx.lock``), in the one order every transaction takes them."""
    return [f"agentmaild:{key}" for key in sorted(set(keys))]


def notify_payload(recipients: Iterable[str]) -> str:
    """A wake-up's payload (``Tx.notify``): the recipients, or "*" when they are too many."""
    joined = ",".join(sorted(set(recipients)))
    return "*" if len(joined.encode()) > NOTIFY_MAX_BYTES else joined


class OverConnector(ABC):
    """The base of a seam written once: its store gives it ``db``, the connector."""

    __slots__ = ()

    @property
    @abstractmethod
    def db(self) -> Connector:
        """The store's connector."""
