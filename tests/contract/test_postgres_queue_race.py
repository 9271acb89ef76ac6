"""Work queues on a shared PostgreSQL: two members claiming at once never take one queue message
or one given-back delivery twice, and one member's open claim does not make the other wait.
Real server, two connections (as two daemons hold)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from agentmaild.models import Agent, Batch
from agentmaild.store.postgres import PostgresMailStore
from tests.support.pg_claimer import claim_inside
from tests.support.stores import put_queue_work

T0 = 1_700_000_000.0


@pytest.fixture
def two(pg_dsn: str) -> Iterator[tuple[PostgresMailStore, PostgresMailStore]]:
    a, b = PostgresMailStore(pg_dsn), PostgresMailStore(pg_dsn)
    for name in ("m1", "m2"):
        a.add_agent(Agent(name=name, capability="builder", channel="spawn", command=("true",)))
        a.join_queue("work", name)
    yield a, b
    a.close()
    b.close()


def put(store: PostgresMailStore, n: int) -> list[str]:
    return put_queue_work(store, n, T0)


def claim(store: PostgresMailStore, agent: str, now: float = T0) -> Batch | None:
    return store.claim(agent, max_messages=5, max_chars=10_000, lease_s=30, now=now)


def test_an_open_queue_claim_is_skipped_not_waited_for(
    two: tuple[PostgresMailStore, PostgresMailStore],
) -> None:
    a, b = two
    first_id, second_id = put(a, 2)
    with a.connection.transaction():  # m1's claim holds its row until this block commits
        mine = claim_inside(a.connection, "m1", max_messages=5, max_chars=10_000, lease_s=30,
                            now=T0)  # fmt: skip
        assert mine is not None and mine.message_ids == (first_id,)
        got: list[Batch | None] = []
        racer = threading.Thread(target=lambda: got.append(claim(b, "m2")))
        racer.start()
        racer.join(timeout=20)
        assert not racer.is_alive()  # SKIP LOCKED: no wait for m1's transaction
    [theirs] = got
    assert theirs is not None and theirs.message_ids == (second_id,)
    assert theirs.delivery_id != mine.delivery_id


def test_racing_members_take_every_queue_message_once(
    two: tuple[PostgresMailStore, PostgresMailStore],
) -> None:
    a, b = two
    sent = put(a, 60)
    taken: dict[str, list[Batch]] = {"m1": [], "m2": []}
    start = threading.Barrier(2)

    def member(store: PostgresMailStore, name: str) -> None:
        start.wait()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            batch = claim(store, name)
            if batch is None:  # a look may come back empty while the other holds a row
                if store.totals()["unread"] == 0:
                    return
                continue
            taken[name].append(batch)
            store.ack_delivery(batch.delivery_id, now=T0 + 1)

    racers = [threading.Thread(target=member, args=(s, n)) for s, n in ((a, "m1"), (b, "m2"))]
    for t in racers:
        t.start()
    for t in racers:
        t.join(timeout=120)
    got = [i for batches in taken.values() for bt in batches for i in bt.message_ids]
    assert sorted(got) == sorted(sent)  # every message once
    assert all(len(bt.message_ids) == 1 for bts in taken.values() for bt in bts)
    assert a.totals() == {"messages": 60, "unread": 0}
    assert {q.name: q.depth for q in a.queues()} == {"work": 0}


def test_a_given_back_queue_delivery_is_taken_over_by_one_member(
    two: tuple[PostgresMailStore, PostgresMailStore],
) -> None:
    a, b = two
    [mid] = put(a, 1)
    first = claim(a, "m1")
    assert first is not None
    a.release(first.delivery_id, error="crashed", max_attempts=5, now=T0 + 1)
    with a.connection.transaction():
        again = claim_inside(a.connection, "m2", max_messages=5, max_chars=10_000, lease_s=30,
                             now=T0 + 2)  # fmt: skip
        assert again is not None
        assert (again.delivery_id, again.attempt, again.message_ids) == (first.delivery_id, 2,
                                                                          (mid,))  # fmt: skip
        assert claim(b, "m1", now=T0 + 2) is None  # the locked delivery is not taken twice
    assert a.queues()[0].held == (("m2", first.delivery_id, 2),)
