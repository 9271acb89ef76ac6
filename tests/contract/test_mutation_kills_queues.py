"""Queue claims in both stores, at the edges the queue contract tests leave out (issue 18).

A fresh queue claim's batch fields; take-over order among several pending queue deliveries; a
pending queue delivery whose mail was all read meanwhile is closed and the next one taken.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Batch, Message
from agentmaild.store.base import MailStore
from agentmaild.store.memory import MemoryMailStore
from agentmaild.store.records import InsertRequest
from agentmaild.store.sqlite import SqliteMailStore

T0 = 1_700_000_000.0


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MailStore]:
    s: MailStore = (
        SqliteMailStore(tmp_path / "mail.db") if request.param == "sqlite" else MemoryMailStore()
    )
    for name in ("m1", "m2", "m3"):
        s.add_agent(Agent(name=name, capability="builder", channel="spawn", command=("true",)))
        s.join_queue("work", name)
    yield s
    s.close()


def send(store: MailStore, at: float) -> str:
    m = Message(id=new_id("msg"), from_agent="lead", to_agent="queue:work", subject="s",
                body="b", created_at=iso_now(at))  # fmt: skip
    store.insert(InsertRequest(messages=(m,), now=at))
    return m.id


def claim(store: MailStore, agent: str, now: float) -> Batch | None:
    return store.claim(agent, max_messages=10, max_chars=10_000, lease_s=30, now=now)


def test_a_fresh_queue_claim_is_a_dlv_batch_of_its_taker_on_a_first_attempt(
    store: MailStore,
) -> None:
    mid = send(store, T0)
    got = claim(store, "m2", T0 + 5)
    assert got is not None
    assert got.delivery_id.startswith("dlv-") and got.message_ids == (mid,)
    assert (got.agent, got.attempt, got.lease_until) == ("m2", 1, T0 + 35)


def test_take_over_takes_the_oldest_pending_queue_delivery_first(store: MailStore) -> None:
    send(store, T0)
    send(store, T0 + 1)
    # Claimed out of order: the delivery made later (in the store) has the earlier creation time.
    late = claim(store, "m1", T0 + 20)
    early = claim(store, "m2", T0 + 10)
    assert late is not None and early is not None
    for b in (late, early):
        store.release(b.delivery_id, error="died", max_attempts=5, now=T0 + 30)
    first = claim(store, "m3", T0 + 40)
    assert first is not None and first.delivery_id == early.delivery_id and first.attempt == 2
    assert (first.agent, first.lease_until) == ("m3", T0 + 70)
    store.ack_delivery(first.delivery_id, now=T0 + 41)
    second = claim(store, "m3", T0 + 42)
    assert second is not None and second.delivery_id == late.delivery_id


def test_a_pending_queue_delivery_read_meanwhile_is_closed_and_the_next_one_taken(
    store: MailStore,
) -> None:
    gone, kept = send(store, T0), send(store, T0 + 1)
    a, b = claim(store, "m1", T0 + 2), claim(store, "m2", T0 + 3)
    assert a is not None and b is not None and a.message_ids == (gone,)
    for d in (a, b):
        store.release(d.delivery_id, error="died", max_attempts=5, now=T0 + 4)
    assert store.ack([gone]) == [gone]  # read by a pull while its delivery was pending
    got = claim(store, "m3", T0 + 5)
    assert got is not None
    assert (got.delivery_id, got.message_ids, got.attempt) == (b.delivery_id, (kept,), 2)
    store.ack_delivery(got.delivery_id, now=T0 + 6)
    assert claim(store, "m3", T0 + 7) is None  # the closed one is not taken over later
    assert store.queues()[0].depth == 0


def test_acking_queue_mail_marks_its_booting_taker_reached_not_the_queue(store: MailStore) -> None:
    store.add_agent(Agent(name="fresh", capability="builder", channel="spawn", state="booting"))
    store.join_queue("work", "fresh")
    send(store, T0)
    got = claim(store, "fresh", T0 + 1)
    assert got is not None
    assert store.ack_delivery(got.delivery_id, now=T0 + 2) == 1
    fresh = store.get_agent("fresh")
    assert fresh is not None and fresh.state == "working"
