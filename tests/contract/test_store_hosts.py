"""The MailStore contract for agents per host: an agent row keeps its host, and the start-up
re-queue of a host's daemon (``reap_expired(everything=True, host=…)``) takes back only the claims
of that host's agents and of agents of any host; another host's live claims stay. Every store."""

from __future__ import annotations

import pytest

from agentmaild.models import Agent
from agentmaild.store.base import MailStore
from tests.contract.test_store_contract import T0, claim, make, put


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    return any_store


def test_an_agent_keeps_its_host(store: MailStore) -> None:
    store.add_agent(Agent(name="far", capability="builder", host="host-b"))
    store.add_agent(Agent(name="near", capability="builder"))
    found = store.get_agent("far")
    assert found is not None and found.host == "host-b"
    assert {a.name: a.host for a in store.list_agents()} == {"far": "host-b", "near": None}


def test_a_hosts_restart_requeues_only_its_own_agents_claims(store: MailStore) -> None:
    store.add_agent(Agent(name="bob", capability="builder", host="host-a"))
    store.add_agent(Agent(name="carol", capability="builder", host="host-b"))
    store.add_agent(Agent(name="dave", capability="builder"))  # any host
    put(store, make(), make("carol"), make("dave"))
    bob, carol, dave = claim(store), claim(store, "carol"), claim(store, "dave")
    assert bob is not None and carol is not None and dave is not None
    reaped = store.reap_expired(now=T0, everything=True, host="host-a")
    assert reaped == sorted([(bob.delivery_id, "bob"), (dave.delivery_id, "dave")])
    assert store.counts()["carol"].in_flight == 1  # host-b's live claim is left alone
    # Its lease still ends for everyone: a dead host's claims wait for it, re-queued.
    assert store.reap_expired(now=T0 + 10_000, host="host-a") == [(carol.delivery_id, "carol")]
