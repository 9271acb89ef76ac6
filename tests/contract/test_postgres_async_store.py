"""``PgAsyncMailStore``: the daemon's claims and acks on async connections, counted on the wire.

A woken delivery is two round trips to the server, the claim and the ack: the look for mail read
elsewhere that the loop makes straight after the claim is the claim's own answer. Counted from
libpq's protocol trace of the store's connection (one Sync per round trip), over a real
``DeliveryLoop`` step and a real PostgreSQL; any other look still asks the server.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import AsyncIterator
from typing import IO

import anyio
import psycopg
import pytest

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.aio_postgres import LOOK_FRESH_S, PgAsyncMailStore
from agentmaild.store.postgres import PostgresMailStore

SETTINGS = LoopSettings(lease_s=300.0)


class Wire:
    """libpq's trace of the one connection the store's async calls use (``concurrency=1``)."""

    def __init__(self, store: PgAsyncMailStore) -> None:
        self._store = store
        self._file: IO[bytes] = tempfile.TemporaryFile()
        self._mark = 0

    async def start(self) -> None:
        cur = await self._store.conns.take()  # opens it: the calls below all get this one
        try:
            cur.connection.pgconn.trace(self._file.fileno())
            cur.connection.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        finally:
            await self._store.conns.give(cur)

    def mark(self) -> None:
        """Count from here on (once the statements are prepared: a first use adds a Parse)."""
        self._mark = len(self._trips())

    def trips(self) -> list[str]:
        """The round trips since ``mark``: for each, the first line of the statement(s) run."""
        return self._trips()[self._mark:]

    def _trips(self) -> list[str]:
        self._file.seek(0)
        text = self._file.read().decode(errors="replace")
        names = dict(re.findall(r'^F\t\d+\tParse\t "(\w+)" "([^\n]*)', text, re.M))
        trips, pending = [], []
        for kind, name in re.findall(r'^F\t\d+\t(Bind|Sync|Query)\t?(?: "[^"]*" "(\w*)")?', text,
                                     re.M):
            if kind == "Sync":
                trips.append(" ".join(pending) or "(prepare)")
                pending = []
            elif kind == "Bind":
                pending.append(names.get(name, name))
        return trips

    def close(self) -> None:
        self._file.close()


@pytest.fixture
async def rig(pg_dsn: str) -> AsyncIterator[tuple[PostgresMailStore, PgAsyncMailStore, Wire]]:
    sync = PostgresMailStore(pg_dsn, pool_size=1)
    sync.add_agent(Agent(name="demo", capability="builder", channel="spawn", command=("true",)))
    store = PgAsyncMailStore(sync, concurrency=1)
    wire = Wire(store)
    await wire.start()
    try:
        yield sync, store, wire
    finally:
        await store.aclose()
        wire.close()


def _loop(sync: PostgresMailStore, store: PgAsyncMailStore, channel: FakeChannel) -> DeliveryLoop:
    agent = sync.get_agent("demo")
    assert agent is not None
    return DeliveryLoop(agent, channel, store, Mailer(sync), SETTINGS)


async def test_a_woken_delivery_is_two_round_trips_the_claim_and_the_ack(
    rig: tuple[PostgresMailStore, PgAsyncMailStore, Wire],
) -> None:
    sync, store, wire = rig
    mailer, channel = Mailer(sync), FakeChannel()
    loop = _loop(sync, store, channel)
    with anyio.fail_after(20):
        for n in range(2):  # the first delivery prepares the statements
            wire.mark()
            sent = mailer.send(sender="lead", to="demo", subject="s", body=f"b{n}").messages[0]
            assert await loop.step() is StepResult.DELIVERED
            assert channel.delivered[-1][0].message_ids == (sent.id,)
    trips = wire.trips()
    assert len(trips) == 2, trips
    assert "am_claim(" in trips[0] and "am_ack(" in trips[1]
    rows = sync.list_messages(to_agent="demo")
    assert [(m.read, m.acked_by) for m in rows] == [
        (True, b.delivery_id) for b, _ in reversed(channel.delivered)]


async def test_a_look_other_than_the_one_after_its_claim_asks_the_server(
    pg_dsn: str, rig: tuple[PostgresMailStore, PgAsyncMailStore, Wire],
) -> None:
    sync, store, wire = rig
    mailer = Mailer(sync)
    ids = [mailer.send(sender="lead", to="demo", subject="s", body=f"b{n}").messages[0].id
           for n in range(2)]  # fmt: skip
    with anyio.fail_after(20):
        batch = await store.claim("demo", max_messages=10, max_chars=100_000, lease_s=300.0,
                                  now=1_700_000_000.0)
        assert batch is not None and sorted(batch.message_ids) == sorted(ids)
        with psycopg.connect(pg_dsn, autocommit=True) as other:  # read elsewhere, by id
            other.execute("UPDATE messages SET read = 1 WHERE id = %s", (batch.message_ids[0],))
        assert await store.unread_among(batch.message_ids[1:]) == {batch.message_ids[1]}
        await anyio.sleep(2 * LOOK_FRESH_S)  # the look now comes later than its claim's answer
        assert await store.unread_among(batch.message_ids) == {batch.message_ids[1]}
    trips = [t for t in wire.trips() if t != "(prepare)"]
    assert len(trips) == 3, trips  # the claim, then both looks went to the server
    assert "am_claim(" in trips[0]
    assert all(t.startswith("SELECT id FROM messages WHERE id = ANY") for t in trips[1:])


async def test_the_look_straight_after_a_claim_is_its_answer_and_comes_once(
    rig: tuple[PostgresMailStore, PgAsyncMailStore, Wire],
) -> None:
    sync, store, wire = rig
    sent = Mailer(sync).send(sender="lead", to="demo", subject="s", body="b").messages[0]
    with anyio.fail_after(20):
        batch = await store.claim("demo", max_messages=10, max_chars=100_000, lease_s=300.0,
                                  now=1_700_000_000.0)
        assert batch is not None and batch.message_ids == (sent.id,)
        assert await store.unread_among(batch.message_ids) == {sent.id}
        assert [t for t in wire.trips() if t != "(prepare)"] == [wire.trips()[-1]]  # the claim
        assert await store.ack_delivery(batch.delivery_id, now=1_700_000_001.0) == 1
        assert await store.unread_among(batch.message_ids) == set()  # asked: it is read now
    trips = [t for t in wire.trips() if t != "(prepare)"]
    assert [t.split("(")[0] for t in trips] == [
        "SELECT * FROM am_claim", "SELECT * FROM am_ack",
        "SELECT id FROM messages WHERE id = ANY "]
