"""The MailStore contract for interrupts, on every store: an interrupt's mail joins the claimed
delivery it interrupts (only that: unread, unclaimed, the holder's own, a claimed delivery), and
the delivery's redelivery carries it under the same id; the type ``interrupt`` is stored."""

from __future__ import annotations

import pytest

from agentmaild.models import Agent
from agentmaild.store.base import MailStore
from tests.contract.test_store_contract import T0, claim, make, put


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    return any_store


def test_an_interrupt_joins_the_claimed_delivery_and_is_redelivered_with_it(
    store: MailStore,
) -> None:
    store.add_agent(Agent(name="bob", capability="builder"))
    store.add_agent(Agent(name="carol", capability="builder"))
    put(store, make(body="the long task"))
    batch = claim(store)
    assert batch is not None
    stop = make(type="interrupt", priority="urgent", body="stop", at=T0 + 1)
    theirs = make("carol", type="interrupt", at=T0 + 1)
    put(store, stop, theirs)
    assert store.get_message(stop.id).type == "interrupt"  # type: ignore[union-attr]
    assert not store.attach_to_delivery(theirs.id, batch.delivery_id, "bob")  # not bob's mail
    assert not store.attach_to_delivery(stop.id, "dlv-nosuchdelivery00", "bob")
    assert store.attach_to_delivery(stop.id, batch.delivery_id, "bob")
    assert not store.attach_to_delivery(stop.id, batch.delivery_id, "bob")  # claimed already
    assert claim(store, now=T0 + 2) is None  # the lease holds: nothing else is handed out
    store.release(batch.delivery_id, error="interrupted", max_attempts=5, now=T0 + 2, count=0)
    again = claim(store, now=T0 + 3)
    assert again is not None and (again.delivery_id, again.attempt) == (batch.delivery_id, 2)
    assert {m.id for m in again.messages} == {stop.id, *batch.message_ids}
    assert not store.attach_to_delivery(theirs.id, again.delivery_id, "carol")  # not carol's
    assert store.ack_delivery(again.delivery_id, now=T0 + 4) == 2
    assert not store.attach_to_delivery(stop.id, again.delivery_id, "bob")  # read: never again
