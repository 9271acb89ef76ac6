"""Delivery-store corners found by ``make mutate``, over both stores (SQLite and the fake)."""

from __future__ import annotations

import pytest

from agentmaild.ids import iso_now, new_id
from agentmaild.models import Message
from agentmaild.store.base import MailStore
from agentmaild.store.records import InsertRequest

T0 = 1_700_000_000.0


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    return any_store


def put(store: MailStore, n: int) -> list[str]:
    msgs = tuple(
        Message(id=new_id("msg"), from_agent="lead", to_agent="bob", subject="s", body="b",
                type="status", priority="normal", created_at=iso_now(T0 + i))
        for i in range(n)
    )
    store.insert(InsertRequest(messages=msgs, now=T0))
    return [m.id for m in msgs]


def test_a_claim_without_a_message_limit_takes_them_all(store: MailStore) -> None:
    ids = put(store, 3)
    batch = store.claim("bob", max_messages=-1, max_chars=10_000, lease_s=30.0, now=T0)
    assert batch is not None and list(batch.message_ids) == ids


def claim(store: MailStore, n: int = 1, *, now: float = T0) -> str:
    batch = store.claim("bob", max_messages=n, max_chars=10_000, lease_s=30.0, now=now)
    assert batch is not None
    return batch.delivery_id


def test_a_read_pending_delivery_is_passed_over_for_the_next_one(store: MailStore) -> None:
    first, second = put(store, 2)
    one = claim(store)
    two = claim(store, now=T0 + 60)  # the first lease ran out: a second delivery
    assert store.reap_expired(now=T0 + 61, everything=True) == sorted([(one, "bob"), (two, "bob")])
    store.ack([first])  # the older pending delivery was read another way
    again = store.claim("bob", max_messages=5, max_chars=10_000, lease_s=30.0, now=T0 + 2)
    assert again is not None
    assert (again.delivery_id, again.message_ids) == (two, (second,))


def test_a_release_keeps_the_first_2000_characters_of_its_error(store: MailStore) -> None:
    put(store, 1)
    delivery = claim(store)
    store.release(delivery, error="e" * 2000 + "TAIL", max_attempts=1, now=T0)
    [dead] = store.dead_letters("bob")
    assert dead.last_error == "e" * 2000
