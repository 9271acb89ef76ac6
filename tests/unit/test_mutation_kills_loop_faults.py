"""The delivery loop when its store fails or its caller cancels at the worst moment.

FakeChannel over the real SQLite store failing on cue (tests/support/faulty_store.py). Written
against the survivors of ``make mutate``: a failed lease extension is logged and the next one
still keeps the lease; a release that fails past the lease still counts the failure; a dead
letter whose NDR cannot be written is logged under its delivery; a cancellation that lands after
the agent confirmed still acks, and one that lands while the ack is being retried does not stop
the retry (the settle is shielded).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest
from structlog.testing import capture_logs

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.errors import DeliveryFailed
from agentmaild.mail.mailer import DAEMON_SENDER, Mailer
from agentmaild.models import Agent, Batch
from agentmaild.store.aio import AsyncMailStore
from tests.support.clock import Clock
from tests.support.faulty_store import FaultyStore, store_full
from tests.support.waiting import wait_until

SETTINGS = LoopSettings(
    lease_s=30.0, max_attempts=3, backoff_initial_s=1.0, backoff_max_s=10.0, backoff_jitter=0.0
)
WALL = 1_700_000_000.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FaultyStore]:
    s = FaultyStore(tmp_path / "mail.db")
    s.add_agent(Agent(name="alice", capability="builder", channel="spawn"))
    s.add_agent(Agent(name="bob", capability="lead"))
    yield s
    s.close()


def send(store: FaultyStore, n: int = 1) -> None:
    for i in range(n):  # distinct bodies: the loop guard collapses identical mail
        Mailer(store).send(sender="bob", to="alice", subject="s", body=f"b{i}")


def make_loop(
    store: FaultyStore, channel: FakeChannel, settings: LoopSettings = SETTINGS, **kw: Any
) -> DeliveryLoop:
    agent = store.get_agent("alice")
    assert agent is not None
    return DeliveryLoop(agent, channel, AsyncMailStore(store), Mailer(store), settings, **kw)


def lease_of(store: FaultyStore, delivery_id: str) -> float:
    row = store.connection.execute(
        "SELECT lease_until FROM am_deliveries WHERE id = ?", (delivery_id,)
    ).fetchone()
    return float(row["lease_until"])


def acked(store: FaultyStore) -> bool:
    return all(m.acked_at is not None for m in store.inbox("alice"))


async def test_a_failed_lease_extension_is_logged_and_the_next_one_keeps_it(
    store: FaultyStore,
) -> None:
    send(store)
    store.faults["extend_lease"] = [store_full()]

    async def handler(batch: Batch, text: str) -> None:
        # The first extension (a third of a lease in) fails; the loop goes on and the next holds.
        await wait_until(lambda: lease_of(store, batch.delivery_id) > batch.lease_until, 10)

    loop = make_loop(store, FakeChannel(handler), replace(SETTINGS, lease_s=0.3))
    with capture_logs() as logs:
        assert await loop.step() is StepResult.DELIVERED
    [batch] = loop.channel.attempts  # type: ignore[attr-defined]
    [line] = [e for e in logs if e["event"] == "delivery.lease_extend_failed"]
    assert line == {
        "event": "delivery.lease_extend_failed", "log_level": "warning", "agent": "alice",
        "delivery_id": batch.delivery_id, "error": "database or disk is full",
    }
    assert store.calls["extend_lease"] >= 2 and acked(store)


async def test_a_release_that_fails_past_the_lease_still_counts_the_failure(
    store: FaultyStore,
) -> None:
    send(store)
    wall = Clock(WALL)

    async def handler(batch: Batch, text: str) -> None:
        wall.now = batch.lease_until + 1.0  # the turn outlived its lease
        raise DeliveryFailed("boom")

    clock = Clock(100.0)
    loop = make_loop(store, FakeChannel(handler), clock=clock, wall=wall)
    store.faults["release"] = [store_full()]
    with capture_logs() as logs:
        assert await loop.step() is StepResult.FAILED
    events = [e["event"] for e in logs if e["event"].startswith("delivery.")]
    assert events == ["delivery.release_failed", "delivery.failed"]
    assert loop.failures == 1 and loop.failed_total == 1
    assert loop.snapshot()["failures"] == 1 and loop.snapshot()["backoff_s"] == 1.0
    assert store.counts()["alice"].in_flight == 1  # left for the reaper
    # Reaped, the batch fails again: now the store's own count (1: the lost release never
    # counted) sets the backoff, not the loop's running tally (2).
    store.reap_expired(now=wall.now)
    clock.now += 1.0
    assert await loop.step() is StepResult.FAILED
    assert loop.failures == 1 and loop.snapshot()["backoff_s"] == 1.0


async def test_a_dead_letter_whose_ndr_fails_is_logged_under_its_delivery(
    store: FaultyStore,
) -> None:
    send(store)
    channel = FakeChannel()
    channel.fail_next = 1
    loop = make_loop(store, channel, replace(SETTINGS, max_attempts=1), clock=Clock(100.0))
    store.faults["insert"] = [store_full()]
    with capture_logs() as logs:
        assert await loop.step() is StepResult.DEAD
    [batch] = channel.attempts
    [line] = [e for e in logs if e["event"] == "delivery.ndr_failed"]
    assert line["delivery_id"] == batch.delivery_id and line["log_level"] == "error"
    assert [m for m in store.inbox("bob") if m.from_agent == DAEMON_SENDER] == []


async def test_two_dead_letters_from_one_loop_count_two(store: FaultyStore) -> None:
    send(store, 2)
    channel = FakeChannel()
    channel.fail_next = 2
    settings = replace(SETTINGS, max_attempts=1, batch_max_messages=1)
    loop = make_loop(store, channel, settings, clock=Clock(100.0))
    assert await loop.step() is StepResult.DEAD
    assert await loop.step() is StepResult.DEAD
    assert loop.snapshot()["dead_total"] == 2 and loop.snapshot()["failed_total"] == 2


async def test_a_loop_whose_clock_reads_zero_delivers_and_does_not_back_off(
    store: FaultyStore,
) -> None:
    # time.monotonic() may read under a second (a fresh VM); no backoff is due at start, nor
    # after a dead letter.
    send(store, 2)
    channel = FakeChannel()
    channel.fail_next = 1
    settings = replace(SETTINGS, max_attempts=1, batch_max_messages=1)
    loop = make_loop(store, channel, settings, clock=Clock(0.0))
    assert await loop.step() is StepResult.DEAD
    assert await loop.step() is StepResult.DELIVERED


async def test_a_cancel_that_lands_after_the_agent_confirmed_still_acks(
    store: FaultyStore,
) -> None:
    send(store)
    scope = anyio.CancelScope()

    async def handler(batch: Batch, text: str) -> None:
        scope.cancel()  # delivered at the loop's next checkpoint, after the channel returned

    loop = make_loop(store, FakeChannel(handler), clock=Clock(100.0))
    with capture_logs() as logs, anyio.fail_after(10):
        with scope:
            await loop.step()
    assert scope.cancelled_caught
    assert [e["event"] for e in logs if e["event"].startswith("delivery.")] == ["delivery.acked"]
    [row] = store.list_attempts(agent="alice")
    assert row.outcome == "acked" and acked(store)
    assert loop.snapshot()["delivered_total"] == 1


@pytest.mark.parametrize("confirmed", [True, False])
async def test_a_cancel_during_the_settle_does_not_stop_its_retry(
    store: FaultyStore, confirmed: bool
) -> None:
    send(store)
    scope = anyio.CancelScope()
    store.before["ack_delivery" if confirmed else "release"] = lambda: anyio.from_thread.run_sync(
        scope.cancel
    )
    store.faults["ack_delivery" if confirmed else "release"] = [store_full()]

    async def handler(batch: Batch, text: str) -> None:
        if not confirmed:
            await anyio.sleep_forever()  # until the cancel below

    loop = make_loop(store, FakeChannel(handler), clock=Clock(100.0))
    with anyio.fail_after(10):
        with scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(loop.step)
                if not confirmed:
                    await wait_until(lambda: loop.channel.attempts)  # type: ignore[attr-defined]
                    scope.cancel()
    [row] = store.list_attempts(agent="alice")
    if confirmed:  # the ack failed once (disk full) while cancelled; its retry landed anyway
        assert row.outcome == "acked" and acked(store)
    else:
        assert (row.outcome, row.error) == ("released", "cancelled")
        assert store.counts()["alice"].in_flight == 0
    assert store.calls["ack_delivery" if confirmed else "release"] == 2


async def test_an_abort_after_a_delivery_settled_cancels_nothing(store: FaultyStore) -> None:
    send(store)
    loop = make_loop(store, FakeChannel(), clock=Clock(100.0))
    assert await loop.step() is StepResult.DELIVERED
    loop.abort("agent removed")  # nothing in flight any more: only stops the loop
    assert loop.stopping and await loop.step() is StepResult.PAUSED
    assert acked(store)
