"""Inline writes (issue 15): the daemon's claim or ack runs in the event loop's thread when the
store's thread is idle and the write lock is free at once; otherwise it takes its hop as ever."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Batch
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.notnow import NOT_NOW
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.clock import Clock
from tests.support.faulty_store import FaultyStore
from tests.support.waiting import wait_until

SETTINGS = LoopSettings(lease_s=30.0, max_attempts=3, backoff_initial_s=1.0, backoff_jitter=0.0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteMailStore]:
    s = SqliteMailStore(tmp_path / "mail.db")
    s.add_agent(Agent(name="alice", capability="builder", channel="spawn"))
    yield s
    s.close()


def _send(store: SqliteMailStore, n: int = 1, *, first: int = 0) -> None:
    for i in range(first, first + n):  # distinct bodies: the loop guard collapses repeats
        Mailer(store).send(sender="bob", to="alice", subject="s", body=f"b{i}")


def _claimed(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM am_deliveries").fetchone()[0])


def test_a_held_write_lock_declines_at_once_and_writes_nothing(store: SqliteMailStore) -> None:
    _send(store)
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process is writing
    try:
        claim = lambda: store.claim(  # noqa: E731
            "alice", max_messages=5, max_chars=10_000, lease_s=30, now=1000.0
        )
        assert store.run_inline(claim) is NOT_NOW
        assert _claimed(store.path) == 0
    finally:
        other.execute("ROLLBACK")
        other.close()
    batch = store.run_inline(claim)
    assert isinstance(batch, Batch) and len(batch.messages) == 1
    assert _claimed(store.path) == 1


def test_a_large_wal_declines_an_inline_write(store: SqliteMailStore) -> None:
    _send(store)
    store._inline_wal_max = 0  # the WAL holds the send: past the limit
    assert store.run_inline(lambda: store.extend_lease("dlv-x", lease_s=1, now=1.0)) is NOT_NOW


async def test_the_daemons_claim_and_ack_run_inline_and_are_committed(
    store: SqliteMailStore,
) -> None:
    _send(store, 2)
    threads: list[int] = []

    async def handler(batch: Batch, text: str) -> None:
        threads.append(threading.get_ident())

    astore = AsyncMailStore(store, inline_writes=True)
    agent = store.get_agent("alice")
    assert agent is not None
    loop = DeliveryLoop(agent, FakeChannel(handler), astore, Mailer(store), SETTINGS)
    with anyio.fail_after(10):
        assert await loop.step() is StepResult.DELIVERED
    assert astore.hops.inline_writes == 2 and astore.hops.hops == 0  # the claim and the ack
    with sqlite3.connect(store.path) as conn:  # what another process sees: committed
        rows = conn.execute("SELECT read, acked_by FROM messages").fetchall()
    assert len(rows) == 2 and all(read == 1 and by.startswith("dlv-") for read, by in rows)
    plain = AsyncMailStore(store)  # not the daemon's: every call takes its hop
    assert plain.hops._inline is None


async def test_a_short_turn_starts_no_lease_keeper_and_a_long_one_does(tmp_path: Path) -> None:
    store = FaultyStore(tmp_path / "mail.db")
    store.add_agent(Agent(name="alice", capability="builder", channel="spawn"))
    try:
        _send(store)
        agent = store.get_agent("alice")
        assert agent is not None
        loop = DeliveryLoop(
            agent, FakeChannel(), AsyncMailStore(store), Mailer(store), SETTINGS, clock=Clock()
        )
        with anyio.fail_after(10):
            assert await loop.step() is StepResult.DELIVERED
        assert store.calls.get("extend_lease", 0) == 0  # a turn well inside a third of its lease

        _send(store, first=1)
        extended = anyio.Event()

        async def long_turn(batch: Batch, text: str) -> None:
            await wait_until(lambda: store.calls.get("extend_lease", 0) >= 2, 10)
            extended.set()

        loop = DeliveryLoop(
            agent,
            FakeChannel(long_turn),
            AsyncMailStore(store),
            Mailer(store),
            replace(SETTINGS, lease_s=0.09),
        )
        with anyio.fail_after(10):
            assert await loop.step() is StepResult.DELIVERED
        assert extended.is_set() and store.calls.get("extend_lease", 0) >= 2
    finally:
        store.close()
