"""The MailStore contract, continued: what taking mail tells about the recipient and the mail.

Mail that reached an agent (a daemon delivery acked, or the agent took it itself with ``check``)
moves its registration out of ``booting``; taken mail comes back marked read. Both stores.
"""

from __future__ import annotations

import pytest

from agentmaild.models import Agent
from agentmaild.store.base import MailStore
from tests.contract.test_store_contract import T0, claim, make, put


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    return any_store


def state(store: MailStore, name: str) -> str:
    agent = store.get_agent(name)
    assert agent is not None
    return agent.state


def test_an_acked_delivery_moves_a_booting_agent_to_working(store: MailStore) -> None:
    store.add_agent(Agent(name="bob", capability="builder"))
    put(store, make())
    batch = claim(store)
    assert batch is not None
    assert state(store, "bob") == "booting"  # a claim is no proof: the delivery may fail
    store.release(batch.delivery_id, error="pane gone", max_attempts=5, now=T0)
    assert state(store, "bob") == "booting"
    again = claim(store)
    assert again is not None
    assert store.ack_delivery(again.delivery_id, now=T0) == 1
    assert state(store, "bob") == "working"
    # only booting moves: every other state is someone's decision
    for other in ("idle", "stalled", "completed"):
        store.add_agent(Agent(name=other, capability="builder"))
        store.set_agent_state(other, other, force=True)
        put(store, make(other))
        theirs = claim(store, other)
        assert theirs is not None
        store.ack_delivery(theirs.delivery_id, now=T0)
        assert state(store, other) == other


def test_taking_mail_moves_a_booting_agent_to_working_and_returns_it_read(
    store: MailStore,
) -> None:
    store.add_agent(Agent(name="bob", capability="builder"))
    store.add_agent(Agent(name="carol", capability="builder"))
    put(store, make(), make("carol"))
    assert [m.read for m in store.take_unread("bob", ack=False)] == [False]
    assert state(store, "bob") == "booting"  # looked at, not taken
    assert store.take_unread("carol") != [] and state(store, "bob") == "booting"
    taken = store.take_unread("bob")
    assert [m.read for m in taken] == [True]
    assert state(store, "bob") == "working"
    assert store.take_unread("bob") == [] and state(store, "bob") == "working"
