"""The work-queue part of the MailStore contract: claims by members, take-over, status."""

from __future__ import annotations

import pytest

from agentmaild.errors import NotFound
from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Batch, Message
from agentmaild.store.base import MailStore
from agentmaild.store.records import InsertRequest

T0 = 1_700_000_000.0


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    """Each of the three stores (conftest ``any_store``: SQLite, memory, PostgreSQL)."""
    s = any_store
    for name in ("m1", "m2", "outsider"):
        s.add_agent(Agent(name=name, capability="builder", channel="spawn", command=("true",)))
    s.join_queue("work", "m1")
    s.join_queue("work", "m2")
    return s


def send(store: MailStore, to: str = "queue:work", at: float = T0, subject: str = "s") -> str:
    m = Message(id=new_id("msg"), from_agent="lead", to_agent=to, subject=subject, body="b",
                created_at=iso_now(at))  # fmt: skip
    store.insert(InsertRequest(messages=(m,), now=at))
    return m.id


def claim(store: MailStore, agent: str, now: float = T0) -> Batch | None:
    return store.claim(agent, max_messages=10, max_chars=10_000, lease_s=30, now=now)


def test_each_member_claims_one_queue_message_and_outsiders_none(store: MailStore) -> None:
    ids = [send(store, at=T0 + i) for i in range(3)]
    assert claim(store, "outsider") is None
    first, second = claim(store, "m1"), claim(store, "m2")
    assert first is not None and second is not None
    assert first.message_ids == (ids[0],) and second.message_ids == (ids[1],)
    assert claim(store, "m1") is None  # one batch in flight per agent, as for direct mail
    assert store.pending_agents() >= {"m1", "m2"}
    [q] = store.queues()
    assert (q.name, q.members, q.depth) == ("work", ("m1", "m2"), 1)
    assert {(a, d) for a, d, _ in q.held} == {("m1", first.delivery_id), ("m2", second.delivery_id)}


def test_a_released_queue_delivery_is_taken_over_with_its_id_and_attempt(
    store: MailStore,
) -> None:
    mid = send(store)
    held = claim(store, "m1")
    assert held is not None
    store.release(held.delivery_id, error="agent died", max_attempts=5, now=T0 + 1)
    assert store.queues()[0].depth == 1
    again = claim(store, "m2", now=T0 + 2)
    assert again is not None
    assert (again.delivery_id, again.message_ids, again.attempt) == (held.delivery_id, (mid,), 2)
    assert store.queues()[0].held == (("m2", held.delivery_id, 2),)
    assert store.ack_delivery(again.delivery_id, now=T0 + 3) == 1
    assert store.queues()[0].depth == 0 and claim(store, "m1", now=T0 + 4) is None


def test_own_mail_first_and_no_queue_work_for_members_shutting_down(store: MailStore) -> None:
    send(store)
    own = send(store, to="m1")
    got = claim(store, "m1")
    assert got is not None and got.message_ids == (own,)
    store.ack_delivery(got.delivery_id, now=T0)
    store.update_agent("m2", {"shutdown_requested_at": iso_now(T0)})
    assert claim(store, "m2") is None
    store.set_agent_state("m1", "completed")
    assert claim(store, "m1") is None
    assert store.queues()[0].depth == 1


def test_membership_join_leave_and_removal(store: MailStore) -> None:
    assert store.queue_members("work") == ["m1", "m2"]
    store.join_queue("work", "m1")  # idempotent
    assert store.leave_queue("work", "m2") is True and store.leave_queue("work", "m2") is False
    store.remove_agent("m1")
    assert store.queue_members("work") == []
    with pytest.raises(NotFound):
        store.join_queue("work", "ghost")
