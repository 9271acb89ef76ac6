"""No empty claim after a batch that left nothing behind (issue 15): the loop waits for a wake-up.

FakeChannel, real SQLite. The claim tells the loop (``AsyncMailStore.more_after``) whether it saw
anything else claimable; only then does the loop claim again at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.waiting import wait_until

SETTINGS = LoopSettings(lease_s=30.0, poll_interval_s=7.0, backoff_jitter=0.0)
CLAIM = {"max_messages": 20, "max_chars": 50_000, "lease_s": 30.0, "now": 1000.0}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteMailStore]:
    s = SqliteMailStore(tmp_path / "mail.db")
    for name in ("alice", "bob"):
        s.add_agent(Agent(name=name, capability="builder", channel="spawn"))
    yield s
    s.close()


class CountingStore(AsyncMailStore):
    claims = 0

    async def claim(self, agent: str, **kw: object) -> object:  # type: ignore[override]
        self.claims += 1
        return await super().claim(agent, **kw)  # type: ignore[arg-type]


SENT = itertools.count()


def send(store: SqliteMailStore, n: int = 1, to: str = "alice") -> None:
    for _ in range(n):  # distinct subjects: the loop guard collapses repeats
        Mailer(store).send(sender="bob", to=to, subject=f"s{next(SENT)}", body="b")


def loop_on(store: SqliteMailStore, settings: LoopSettings = SETTINGS) -> tuple[DeliveryLoop,
                                                                                 CountingStore,
                                                                                 FakeChannel]:
    agent = store.get_agent("alice")
    assert agent is not None
    aio, channel = CountingStore(store), FakeChannel()
    return DeliveryLoop(agent, channel, aio, Mailer(store), settings, gated=True), aio, channel


def test_the_claim_says_whether_it_left_mail_behind(store: SqliteMailStore) -> None:
    aio = AsyncMailStore(store)
    send(store, 3)
    small = store.claim("alice", **{**CLAIM, "max_messages": 2})
    assert small is not None and aio.more_after(small)  # a full batch: maybe more
    rest = store.claim("bob", **CLAIM)
    assert rest is None
    store.ack_delivery(small.delivery_id, now=1001.0)
    last = store.claim("alice", **{**CLAIM, "now": 1002.0})
    assert last is not None and len(last.messages) == 1
    assert not aio.more_after(last)  # nothing else: no claim needed
    assert aio.more_after(last)  # asked once; unknown afterwards means "maybe"
    store.ack_delivery(last.delivery_id, now=1002.5)
    send(store, 2)
    cut = store.claim("alice", **{**CLAIM, "max_chars": 1, "now": 1003.0})
    assert cut is not None and len(cut.messages) == 1 and aio.more_after(cut)  # cut short


def test_a_queue_member_always_claims_again(store: SqliteMailStore) -> None:
    store.join_queue("review", "alice")
    send(store, 1)
    batch = store.claim("alice", **CLAIM)
    assert batch is not None and AsyncMailStore(store).more_after(batch)


async def test_after_a_batch_that_left_nothing_the_loop_waits_for_a_wake(
    store: SqliteMailStore,
) -> None:
    send(store, 2)
    loop, aio, channel = loop_on(store)
    async with anyio.create_task_group() as tg:
        tg.start_soon(loop.run)
        await wait_until(lambda: len(channel.delivered) == 1 and loop.state == "idle")
        with anyio.move_on_after(0.3):  # an empty claim would come at once
            await wait_until(lambda: aio.claims > 1)
        assert aio.claims == 1
        send(store, 1)
        loop.wake()  # what the sender's poke does
        await wait_until(lambda: len(channel.delivered) == 2)
        assert aio.claims == 2
        loop.stop()


async def test_a_full_batch_is_followed_by_a_claim_at_once(store: SqliteMailStore) -> None:
    send(store, 3)
    loop, _, channel = loop_on(store, replace(SETTINGS, batch_max_messages=2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(loop.run)
        # No wake-up: the full first batch makes the loop claim the third message by itself.
        await wait_until(lambda: sum(len(b.messages) for b, _ in channel.delivered) == 3)
        assert [len(b.messages) for b, _ in channel.delivered] == [2, 1]
        loop.stop()
