"""The daemon's PostgreSQL store: the delivery loop's hot calls on async connections, no thread hop;
and its poll gate (``PgPollGate``).

``AsyncMailStore`` runs each store call in a worker thread: on the path of a woken delivery that is
a hop there and back (two thread wake-ups) for the claim, the look for mail read elsewhere and the
ack, each around one round trip. ``PgAsyncMailStore`` sends the claim and the ack from the event
loop on psycopg's ``AsyncConnection``: the same statements (``am_claim`` and ``am_ack``), the same
parameters and answers as ``PostgresMailStore``; every other call (sends from the daemon, releases,
lease extensions, the rare claim that must look at queues) still goes through the sync store and
its pool.

The look that follows a claim (``unread_among`` with the ids of the batch just claimed, within
``LOOK_FRESH_S`` of its answer: the loop makes it at once) is the claim's own answer, with no round
trip of its own: ``am_claim`` took those rows as unread, under the agent's lock, at its snapshot,
which is as fresh as a look sent once that answer is back would be, to within that one round trip
(a read committed in it reaches the agent as one committed between any look and the injection
does, and the ack records it as read elsewhere). Any other look (other ids, a later look, a batch
claimed by the sync store) runs the ``unread_among`` read.

Same guarantees as the thread: each call is one statement in its own transaction, retried on a
deadlock or serialization failure; it is shielded, so a caller cancelled meanwhile still gets the
result of a claim that committed; a connection the server dropped fails the call it was lent to and
is replaced on the next one (never a blind replay of a write whose commit may have happened).

``PgPollGate`` is the supervisor's cheap "did anything change?" per tick: it compares the store's
change mark (``store.marks``: the server's snapshot ``xmax``, which moves only when some transaction
wrote), so an idle tick is one tiny query; only then does the tick ask which agents have
deliverable mail. It runs on a connection of its own, in a worker thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row

from agentmaild.errors import StoreError
from agentmaild.models import Attempt, Batch
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.claim import (
    ack_params,
    acked_at_once,
    claim_at_once,
    claim_params,
    needs_general,
)
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_tx import PQ, first_line, redacted

T = TypeVar("T")
AConn = psycopg.AsyncConnection[dict[str, Any]]
ACursor = psycopg.AsyncCursor[dict[str, Any]]

_RETRY_DEADLINE_S = 30.0
_RETRYABLE = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
LOOK_FRESH_S = 0.01  # a look later than this after its claim's answer asks the server
_LOOKED_MAX = 1024  # batches claimed whose look never came (a caller other than the loop)


class AsyncConns:
    """Up to ``size`` async connections, one lent per call (``take`` … ``give``), each with its
    cursor kept (a cursor per call costs as much as a quarter of the call here); a connection
    that comes back broken, closed or inside a transaction is closed and dropped (the next call
    opens a fresh one)."""

    def __init__(self, dsn: str, size: int) -> None:
        self._dsn = dsn
        self._size = max(size, 1)
        self._idle: list[ACursor] = []
        self._open = 0
        self._freed: anyio.Event | None = None

    async def take(self) -> ACursor:
        while not self._idle and self._open >= self._size:
            if self._freed is None:
                self._freed = anyio.Event()
            await self._freed.wait()
        if self._idle:
            return self._idle.pop()
        self._open += 1
        try:
            return (await self._connect()).cursor()
        except BaseException:
            self._open -= 1
            raise

    async def give(self, cur: ACursor) -> None:
        conn = cur.connection
        if conn.closed or conn.broken or (
            conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        ):
            self._open -= 1
            await conn.close()
        else:
            self._idle.append(cur)
        freed, self._freed = self._freed, None
        if freed is not None:
            freed.set()

    async def _connect(self) -> AConn:
        try:
            return await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, row_factory=dict_row,
                application_name="agentmaild",
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot reach store {redacted(self._dsn)}: {exc}") from exc

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for cur in idle:
            self._open -= 1
            await cur.connection.close()


class PgAsyncMailStore(AsyncMailStore):
    """``AsyncMailStore`` over a pooled ``PostgresMailStore``; claim, ack and the look run on
    ``conns`` in the event loop (see the module docstring)."""

    sync: PostgresMailStore

    def __init__(self, store: PostgresMailStore, *, concurrency: int) -> None:
        super().__init__(store, concurrency=concurrency)
        self.conns = AsyncConns(store.dsn, concurrency)
        # Each batch claimed here (its ids), until the look that follows it: by when it must come.
        self._looked: dict[tuple[str, ...], float] = {}

    async def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        params = claim_params(agent, max_messages=max_messages, max_chars=max_chars,
                              lease_s=lease_s, now=now)
        rows = await self._call(PQ["claim_one"], params, "write")
        if needs_general(rows):
            # A queue member with no mail of its own: the general claim (rare) in the worker thread.
            return await self._grouped(self.sync.claim_general, params)
        batch = self.sync.note_claimed(agent, claim_at_once(agent, rows, params["lease_until"]))
        if batch is not None:
            if len(self._looked) >= _LOOKED_MAX:
                self._looked.clear()
            self._looked[batch.message_ids] = anyio.current_time() + LOOK_FRESH_S
        return batch

    async def ack_delivery(
        self, delivery_id: str, *, now: float, record: Attempt | None = None
    ) -> int:
        rows = await self._call(PQ["ack_one"], ack_params(delivery_id, now, record), "write")
        return acked_at_once(rows[0], record)

    async def unread_among(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        key = tuple(ids)
        fresh_until = self._looked.pop(key, None)
        if fresh_until is not None and anyio.current_time() <= fresh_until:
            return set(key)  # the look straight after this batch's claim: the claim's answer
        rows = await self._call(PQ["unread_among"], {"ids": list(ids)}, "read")
        return {str(r["id"]) for r in rows}

    async def _call(self, sql: str, params: dict[str, Any], what: str) -> list[dict[str, Any]]:
        """One statement (its own transaction), shielded, retried as ``PostgresTransactions``
        retries a write; every psycopg error leaves as a ``StoreError``."""

        async def run(cur: ACursor) -> list[dict[str, Any]]:
            await cur.execute(sql, params, prepare=True)
            return await cur.fetchall()

        with anyio.CancelScope(shield=True):
            rows = await _retried(self.conns, run, what)
        return rows

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.conns.aclose()
        await super().aclose()


async def _retried(
    conns: AsyncConns, fn: Callable[[ACursor], Awaitable[T]], what: str
) -> T:
    deadline = anyio.current_time() + _RETRY_DEADLINE_S
    delay = 0.002
    while True:
        try:
            cur = await conns.take()
            try:
                return await fn(cur)
            finally:
                await conns.give(cur)
        except _RETRYABLE:
            if anyio.current_time() > deadline:
                raise StoreError("store write kept failing: deadlock or conflict") from None
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.1)
        except psycopg.Error as exc:
            raise StoreError(f"store {what} failed: {first_line(exc)}") from exc


class PgPollGate:
    """The ``PollGate`` interface over PostgreSQL (see ``store.aio.PollGate``)."""

    def __init__(self, store: PostgresMailStore) -> None:
        self._store = store
        self._limiter = anyio.CapacityLimiter(1)
        self._xmax: object = None

    @classmethod
    async def open(cls, dsn: str) -> PgPollGate:
        store = await anyio.to_thread.run_sync(
            lambda: PostgresMailStore(dsn, readonly=True)
        )
        return cls(store)

    async def _run(self, fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn, limiter=self._limiter)

    async def changed(self) -> bool:
        xmax = await self._run(self._store.change_mark)
        seen, self._xmax = self._xmax, xmax
        return seen != xmax

    async def registry_version(self) -> int:
        rows = await self._run(lambda: self._store._read(PQ["registry_version"]))
        return int(rows[0]["version"]) if rows else 0

    async def pending_agents(self) -> set[str]:
        return await self._run(self._store.pending_agents)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._run(self._store.close)
