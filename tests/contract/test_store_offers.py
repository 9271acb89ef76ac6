"""The daemon's offers of the ``MailStore`` ABC: ``more_after``, ``run_inline``, ``run_grouped``,
``open_looks``. A store that makes an offer keeps its promise; one that does not (the memory fake)
answers with the ABC's defaults, and ``AsyncMailStore`` runs over either without asking which.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentmaild.models import Agent
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.base import MailStore
from agentmaild.store.memory import MemoryMailStore
from agentmaild.store.notnow import NOT_NOW
from agentmaild.store.sqlite import SqliteMailStore
from tests.contract.test_store_contract import LEASE_S, T0, claim, make, put


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    any_store.add_agent(Agent(name="bob", capability="builder"))
    return any_store


class Step:
    """A ``Runnable`` as ``store.hops`` hands one to ``run_grouped``: it notes when it ran."""

    def __init__(self, name: str, ran: list[str], fn: Callable[[], object] = lambda: None) -> None:
        self.name, self.ran, self.fn = name, ran, fn

    def run(self) -> None:
        self.fn()
        self.ran.append(self.name)

    def reset(self) -> None:
        self.ran.remove(self.name)


def test_more_after_is_false_once_only_after_a_claim_that_left_nothing(store: MailStore) -> None:
    put(store, make(subject="one"), make(subject="two"))
    first = claim(store, n=1)
    assert first is not None and store.more_after(first.delivery_id)  # full: maybe more
    store.ack_delivery(first.delivery_id, now=T0)
    last = claim(store)  # room for more than it found: it saw everything there was
    assert last is not None and len(last.messages) == 1
    tells = not isinstance(store, MemoryMailStore)  # the fake cannot tell: always "maybe"
    assert store.more_after(last.delivery_id) is not tells
    assert store.more_after(last.delivery_id)  # asked once: afterwards unknown, so "maybe"


def test_run_grouped_runs_every_call_once_in_order_on_every_store(store: MailStore) -> None:
    sent = put(store, make(subject="one"), make(subject="two")).messages
    ran: list[str] = []
    acks = [Step(m.id, ran, lambda m=m: store.ack([m.id])) for m in sent]  # type: ignore[misc]
    store.run_grouped(acks)
    assert ran == [m.id for m in sent]
    assert store.unread_among([m.id for m in sent]) == set()


def test_a_store_without_the_offers_keeps_the_abcs_defaults() -> None:
    store = MemoryMailStore()
    called: list[str] = []
    assert store.run_inline(lambda: called.append("x")) is NOT_NOW
    assert called == []  # nothing was run: the call takes its hop instead
    assert store.open_looks() is None


def test_the_sqlite_store_writes_inline_and_looks_off_its_thread(tmp_path: Path) -> None:
    store = SqliteMailStore(tmp_path / "mail.db")
    try:
        store.add_agent(Agent(name="bob", capability="builder"))
        result = store.run_inline(lambda: put(store, make()))
        assert result is not NOT_NOW and len(result.messages) == 1
        looks = store.open_looks()
        assert looks is not None
        try:
            assert looks.unread_among([result.messages[0].id]) == {result.messages[0].id}
        finally:
            looks.close()
    finally:
        store.close()


async def test_the_async_store_runs_over_a_store_without_the_offers() -> None:
    sync = MemoryMailStore()
    sync.add_agent(Agent(name="bob", capability="builder"))
    put(sync, make())
    aio = AsyncMailStore(sync, inline_writes=True)  # asked for, not offered: every call hops
    batch = await aio.claim("bob", max_messages=5, max_chars=10_000, lease_s=LEASE_S, now=T0)
    assert batch is not None and aio.more_after(batch)
    assert await aio.unread_among(batch.message_ids) == set(batch.message_ids)
    assert await aio.ack_delivery(batch.delivery_id, now=T0) == 1
    assert aio.hops.inline_writes == 0
    await aio.aclose()
