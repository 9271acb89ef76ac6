"""The queue's turn on every store (docs/queues.md; the SQL stores' one claim and the memory
fake): queue work goes to the idle member served least recently; a member out of turn leaves it,
is told when to claim again, and takes it once it has waited past the grace (the member in turn
is not claiming)."""

from __future__ import annotations

import pytest

from agentmaild.models import Agent, Batch
from agentmaild.store.base import MailStore
from agentmaild.store.queues import QUEUE_GRACE_S
from tests.support.stores import put_queue_work

T0 = 1_700_000_000.0


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    """Members w1, w2, w3 of the queue ``work``, none served yet, on each store."""
    for name in ("w1", "w2", "w3"):
        any_store.add_agent(Agent(name=name, capability="builder", channel="spawn",
                                  command=("true",)))  # fmt: skip
        any_store.join_queue("work", name)
    return any_store


def claim(store: MailStore, agent: str, now: float) -> Batch | None:
    return store.claim(agent, max_messages=5, max_chars=10_000, lease_s=30, now=now)


def test_queue_work_goes_round_the_idle_members(store: MailStore) -> None:
    seen = []
    for i in range(6):
        [mid] = put_queue_work(store, 1, T0 + i)
        # Everyone asks; only the idle member served least recently takes it.
        got = {name: claim(store, name, T0 + i + 0.1) for name in ("w3", "w2", "w1")}
        [(taker, batch)] = [(n, b) for n, b in got.items() if b is not None]
        assert batch is not None and batch.message_ids == (mid,)
        store.ack_delivery(batch.delivery_id, now=T0 + i + 0.2)
        seen.append(taker)
    assert seen == ["w1", "w2", "w3", "w1", "w2", "w3"]  # never served first, then by name


def test_a_member_out_of_turn_takes_the_work_after_the_grace(store: MailStore) -> None:
    [mid] = put_queue_work(store, 1, T0)
    assert claim(store, "w3", T0 + 0.1) is None  # w1 and w2 are idle and ahead of it
    assert getattr(store, "deferred", None) == {"w3": QUEUE_GRACE_S}  # claim again after it
    late = claim(store, "w3", T0 + QUEUE_GRACE_S + 0.1)  # nobody in turn took it meanwhile
    assert late is not None and late.message_ids == (mid,)


def test_a_member_holding_work_is_not_ahead_of_anyone(store: MailStore) -> None:
    first, second = put_queue_work(store, 2, T0)
    held = claim(store, "w1", T0 + 0.1)
    assert held is not None and held.message_ids == (first,)
    # w1 holds a lease: w2 is first in turn among the idle; w3 is second, and one item waits.
    assert claim(store, "w3", T0 + 0.2) is None
    mine = claim(store, "w2", T0 + 0.3)
    assert mine is not None and mine.message_ids == (second,)
