"""A delivery's bookkeeping (delivery/bookkeeping.py) against a real SQLite store that fails on cue.

Written against the survivors of ``make mutate``: ack and release retry a failing store with a
doubling delay while the lease holds and give up at its end; a release that finds its claim
reaped still writes the history row (best effort); an NDR is never sent for an NDR, and one that
cannot be written is logged, not raised.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from agentmaild.delivery.bookkeeping import Bookkeeper
from agentmaild.errors import NotFound, StoreError
from agentmaild.ids import iso_now
from agentmaild.mail.mailer import DAEMON_SENDER, Mailer
from agentmaild.models import Agent, Batch
from agentmaild.store.aio import AsyncMailStore
from tests.support.faulty_store import FaultyStore, store_full

WALL = 1_700_000_000.0


class Wall:
    def __init__(self) -> None:
        self.now = WALL

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FaultyStore]:
    s = FaultyStore(tmp_path / "mail.db")
    s.add_agent(Agent(name="alice", capability="builder", channel="spawn"))
    s.add_agent(Agent(name="bob", capability="lead"))
    yield s
    s.close()


def claimed(store: FaultyStore, *, lease_s: float = 60.0, sender: str = "bob") -> Batch:
    Mailer(store).send(sender=sender, to="alice", subject="s", body="b")
    batch = store.claim("alice", max_messages=5, max_chars=10_000, lease_s=lease_s, now=WALL)
    assert batch is not None
    return batch


def books(store: FaultyStore, wall: Wall) -> Bookkeeper:
    return Bookkeeper("alice", AsyncMailStore(store), Mailer(store), wall=wall,
                      log=structlog.get_logger("test").bind(agent="alice"))


async def test_ack_retries_a_failing_store_with_a_doubling_delay(store: FaultyStore) -> None:
    batch = claimed(store)
    store.faults["ack_delivery"] = [store_full(), store_full()]
    with capture_logs() as logs:
        assert await books(store, Wall()).ack(batch, duration_s=1.23456) == 1
    retries = [e for e in logs if e["event"] == "delivery.ack_retrying"]
    assert [e["retry_in_s"] for e in retries] == [0.05, 0.1]
    assert retries[0]["delivery_id"] == batch.delivery_id
    assert retries[0]["error"] == "database or disk is full"
    assert retries[0]["log_level"] == "warning"
    [row] = store.list_attempts(agent="alice")
    assert (row.outcome, row.error, row.duration_s, row.at) == ("acked", None, 1.2346, WALL)
    assert (row.delivery_id, row.agent, row.attempt) == (batch.delivery_id, "alice", 1)
    assert row.message_ids == batch.message_ids
    assert {m.acked_at for m in store.inbox("alice")} == {iso_now(WALL)}


async def test_ack_gives_up_when_the_lease_ends(store: FaultyStore) -> None:
    batch = claimed(store, lease_s=0.05)  # the first retry would outlast the lease
    store.faults["ack_delivery"] = [store_full()]
    with pytest.raises(StoreError):
        await books(store, Wall()).ack(batch)
    assert store.counts()["alice"].in_flight == 1  # left for the reaper


async def test_ack_of_a_reaped_claim_is_not_found(store: FaultyStore) -> None:
    batch = claimed(store)
    store.faults["ack_delivery"] = [NotFound("gone")]
    with pytest.raises(NotFound):
        await books(store, Wall()).ack(batch)


async def test_release_retries_then_gives_up_at_the_lease(store: FaultyStore) -> None:
    batch = claimed(store)
    store.faults["release"] = [store_full()]
    released = await books(store, Wall()).release(
        batch, "boom", count=1, max_attempts=3, outcome="failed", duration_s=0.5
    )
    assert released is not None and (released.state, released.failures) == ("pending", 1)
    [row] = store.list_attempts(agent="alice")
    assert (row.outcome, row.error, row.duration_s) == ("failed", "boom", 0.5)
    again = claimed(store, lease_s=0.05)
    store.faults["release"] = [store_full()]
    with capture_logs() as logs:
        assert await books(store, Wall()).release(again, "x", count=1, max_attempts=3) is None
    [line] = [e for e in logs if e["event"] == "delivery.release_failed"]
    assert line["error"] == "database or disk is full"
    assert line["delivery_id"] == again.delivery_id


async def test_a_release_of_a_reaped_claim_still_writes_its_history(store: FaultyStore) -> None:
    batch = claimed(store)
    store.reap_expired(now=WALL, everything=True)
    with capture_logs() as logs:
        assert await books(store, Wall()).release(
            batch, "late", count=1, max_attempts=3, outcome="unavailable"
        ) is None
    [line] = [e for e in logs if e["event"] == "delivery.release_failed"]
    assert line["delivery_id"] == batch.delivery_id and "no claimed delivery" in line["error"]
    [row] = store.list_attempts(agent="alice")
    assert (row.outcome, row.error) == ("unavailable", "late")


async def test_a_history_row_that_cannot_be_written_is_logged(store: FaultyStore) -> None:
    batch = claimed(store)
    store.reap_expired(now=WALL, everything=True)
    store.faults["record_attempt"] = [store_full()]
    with capture_logs() as logs:
        await books(store, Wall()).release(batch, "late", count=1, max_attempts=3)
    [line] = [e for e in logs if e["event"] == "delivery.history_failed"]
    assert line["delivery_id"] == batch.delivery_id
    assert line["error"] == "database or disk is full"


async def test_no_ndr_of_an_ndr_and_a_failed_ndr_is_logged(store: FaultyStore) -> None:
    batch = claimed(store)
    keeper = books(store, Wall())
    own = [replace(m, from_agent=DAEMON_SENDER) for m in batch.messages]
    await keeper.report_dead(batch, own, "x", max_attempts=3)
    assert [m for m in store.inbox("bob") if m.from_agent == DAEMON_SENDER] == []
    store.faults["insert"] = [store_full()]
    with capture_logs() as logs:
        await keeper.report_dead(batch, batch.messages, "boom", max_attempts=3)
    [line] = [e for e in logs if e["event"] == "delivery.ndr_failed"]
    assert line["delivery_id"] == batch.delivery_id and line["log_level"] == "error"
    assert line["error"] == "database or disk is full"
    await keeper.report_dead(batch, batch.messages, "boom", max_attempts=3)
    [ndr] = [m for m in store.inbox("bob") if m.from_agent == DAEMON_SENDER]
    assert "1 message(s) failed 3 times: boom" in ndr.body
    assert ndr.subject == "Undeliverable: 1 message(s) to alice"


async def test_a_dead_release_is_stamped_on_the_wall_clock(store: FaultyStore) -> None:
    batch = claimed(store)
    released = await books(store, Wall()).release(batch, "boom", count=1, max_attempts=1)
    assert released is not None and released.state == "dead"
    [dead] = store.dead_letters("alice")
    assert dead.dead_at == iso_now(WALL)


async def test_release_retries_with_a_doubling_delay_until_the_lease_ends(
    store: FaultyStore,
) -> None:
    # The wall stands still, so the retry that gives up is the first whose delay reaches the
    # lease: 0.05, 0.1 and 0.2 s are slept, 0.4 s would outlast a 0.3 s lease.
    batch = claimed(store, lease_s=0.3)
    store.faults["release"] = [store_full() for _ in range(10)]
    assert await books(store, Wall()).release(batch, "x", count=1, max_attempts=3) is None
    assert store.calls["release"] == 4
    assert store.counts()["alice"].in_flight == 1  # left for the reaper
