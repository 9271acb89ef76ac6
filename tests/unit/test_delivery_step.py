"""The DeliveryLoop.step() table, one iteration at a time, with FakeChannel and real SQLite."""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.errors import AgentUnavailable, StoreError
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Batch
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.clock import Clock
from tests.support.waiting import wait_until

SETTINGS = LoopSettings(
    poll_interval_s=0.01,
    lease_s=30.0,
    max_attempts=3,
    backoff_initial_s=1.0,
    backoff_max_s=10.0,
    backoff_jitter=0.0,
)


@pytest.fixture
def mailer(store: SqliteMailStore) -> Mailer:
    return Mailer(store)


def send(mailer: Mailer, subject: str = "hello", priority: str = "normal", body: str = "b") -> str:
    return mailer.send(sender="bob", to="alice", subject=subject, body=body, priority=priority).ids[
        0
    ]


def make_loop(
    store: SqliteMailStore,
    mailer: Mailer,
    channel: FakeChannel,
    clock: Clock,
    settings: LoopSettings = SETTINGS,
) -> DeliveryLoop:
    agent = store.get_agent("alice")
    assert agent is not None
    return DeliveryLoop(agent, channel, AsyncMailStore(store), mailer, settings, clock=clock)


def delivery_state(store: SqliteMailStore, delivery_id: str) -> tuple[str, int, int]:
    row = store.connection.execute(
        "SELECT state, attempts, failures FROM am_deliveries WHERE id = ?", (delivery_id,)
    ).fetchone()
    return row["state"], row["attempts"], row["failures"]


async def test_busy_claims_nothing(store: SqliteMailStore, mailer: Mailer) -> None:
    send(mailer)
    channel = FakeChannel(busy=True)
    loop = make_loop(store, mailer, channel, Clock())
    assert await loop.step() is StepResult.BUSY
    assert channel.attempts == []
    assert store.counts()["alice"].in_flight == 0


async def test_idle_when_nothing_to_claim(store: SqliteMailStore, mailer: Mailer) -> None:
    loop = make_loop(store, mailer, FakeChannel(), Clock())
    assert await loop.step() is StepResult.IDLE
    assert loop.state == "idle"


async def test_paused_claims_nothing(store: SqliteMailStore, mailer: Mailer) -> None:
    send(mailer)
    channel = FakeChannel()
    loop = make_loop(store, mailer, channel, Clock())
    loop.pause()
    assert await loop.step() is StepResult.PAUSED
    assert channel.attempts == []


async def test_delivered_acks_in_priority_order(store: SqliteMailStore, mailer: Mailer) -> None:
    body = f"body-{secrets.token_hex(12)}"  # distinctive: found only where a body is copied
    low = send(mailer, "low one", "low", body=body)
    urgent = send(mailer, "urgent one", "urgent")
    normal = send(mailer, "normal one", "normal")
    channel = FakeChannel()
    loop = make_loop(store, mailer, channel, Clock())
    with capture_logs() as logs:
        assert await loop.step() is StepResult.DELIVERED
    batch, text = channel.delivered[0]
    assert batch.message_ids == (urgent, normal, low)
    assert text.index(urgent) < text.index(normal) < text.index(low)
    assert batch.delivery_id in text and "REDELIVERY" not in text and body in text
    assert all(m.read for m in store.inbox("alice"))
    assert delivery_state(store, batch.delivery_id)[0] == "acked"
    [line] = [e for e in logs if e["event"].startswith("delivery.")]
    assert line["event"] == "delivery.acked"
    assert line["agent"] == "alice" and line["delivery_id"] == batch.delivery_id
    assert line["attempt"] == 1 and line["n_messages"] == 3 and "duration_ms" in line
    assert body not in repr(logs)  # no bodies in the canonical line, nor in any other
    assert loop.snapshot()["delivered_total"] == 1


async def test_failed_releases_then_redelivers_same_id(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    mid = send(mailer)
    channel = FakeChannel()
    channel.fail_next = 1
    clock = Clock()
    loop = make_loop(store, mailer, channel, clock)
    with capture_logs() as logs:
        assert await loop.step() is StepResult.FAILED
    first = channel.attempts[0]
    assert delivery_state(store, first.delivery_id) == ("pending", 1, 1)
    assert not store.get_message(mid).read  # type: ignore[union-attr]
    assert [e["event"] for e in logs if e["event"].startswith("delivery.")] == ["delivery.failed"]
    assert logs[-1]["error"] == "scripted failure" and logs[-1]["backoff_s"] == 1.0
    assert await loop.step() is StepResult.BACKOFF  # no claim while backing off
    assert len(channel.attempts) == 1
    clock.now += 1.0
    assert await loop.step() is StepResult.DELIVERED
    batch, text = channel.delivered[0]
    assert batch.delivery_id == first.delivery_id and batch.attempt == 2
    assert f"REDELIVERY (attempt 2) of delivery {first.delivery_id}" in text
    assert store.get_message(mid).read  # type: ignore[union-attr]
    assert loop.failures == 0 and loop.backoff_until == 0.0


async def test_backoff_is_capped_exponential(store: SqliteMailStore, mailer: Mailer) -> None:
    send(mailer)
    channel = FakeChannel()
    channel.fail_next = 10
    clock = Clock()
    settings = replace(SETTINGS, max_attempts=10, backoff_max_s=3.0)
    loop = make_loop(store, mailer, channel, clock, settings)
    delays = []
    for _ in range(4):
        assert await loop.step() is StepResult.FAILED
        delays.append(loop.backoff_until - clock.now)
        clock.now = loop.backoff_until
    assert delays == [1.0, 2.0, 3.0, 3.0]


async def test_timeout_releases_with_a_failure(store: SqliteMailStore, mailer: Mailer) -> None:
    send(mailer)

    async def hang(batch: Batch, text: str) -> None:
        await anyio.sleep_forever()

    channel = FakeChannel(hang)
    loop = make_loop(store, mailer, channel, Clock(), replace(SETTINGS, deliver_timeout_s=0.05))
    with anyio.fail_after(30):
        assert await loop.step() is StepResult.TIMEOUT
    assert delivery_state(store, channel.attempts[0].delivery_id) == ("pending", 1, 1)
    assert channel.delivered == []


async def test_abort_mid_deliver_releases_not_acks(store: SqliteMailStore, mailer: Mailer) -> None:
    mid = send(mailer)
    started = anyio.Event()

    async def hang(batch: Batch, text: str) -> None:
        started.set()
        await anyio.sleep_forever()

    channel = FakeChannel(hang)
    loop = make_loop(store, mailer, channel, Clock())
    results: list[StepResult] = []

    async def run_step() -> None:
        results.append(await loop.step())

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_step)
            await started.wait()
            loop.abort()
    assert results == [StepResult.CANCELLED]
    assert delivery_state(store, channel.attempts[0].delivery_id) == ("pending", 1, 0)
    assert not store.get_message(mid).read  # type: ignore[union-attr]


async def test_outer_cancel_mid_deliver_releases(store: SqliteMailStore, mailer: Mailer) -> None:
    mid = send(mailer)
    started = anyio.Event()

    async def hang(batch: Batch, text: str) -> None:
        started.set()
        await anyio.sleep_forever()

    channel = FakeChannel(hang)
    loop = make_loop(store, mailer, channel, Clock())
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.step)
            await started.wait()
            tg.cancel_scope.cancel()
    delivery_id = channel.attempts[0].delivery_id
    assert delivery_state(store, delivery_id) == ("pending", 1, 0)
    assert not store.get_message(mid).read  # type: ignore[union-attr]
    assert store.counts()["alice"].in_flight == 0


async def test_unavailable_backs_off_and_counts_toward_dead_letters(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    send(mailer)

    async def gone(batch: Batch, text: str) -> None:
        raise AgentUnavailable("pane is gone")

    channel = FakeChannel(gone)
    loop = make_loop(store, mailer, channel, Clock())
    assert await loop.step() is StepResult.UNAVAILABLE
    # Counted: a recipient that never comes back ends in dead letters and an NDR.
    assert delivery_state(store, channel.attempts[0].delivery_id) == ("pending", 1, 1)
    assert loop.backoff_until > 0


async def test_dead_after_max_attempts_sends_ndr(store: SqliteMailStore, mailer: Mailer) -> None:
    mid = send(mailer, "important")
    channel = FakeChannel()
    channel.fail_next = 99
    clock = Clock()
    loop = make_loop(store, mailer, channel, clock)
    results = []
    for _ in range(3):
        results.append(await loop.step())
        clock.now = loop.backoff_until
    assert results == [StepResult.FAILED, StepResult.FAILED, StepResult.DEAD]
    ids = {b.delivery_id for b in channel.attempts}
    assert len(ids) == 1
    [dead] = store.dead_letters("alice")
    assert dead.message_ids == (mid,) and dead.attempts == 3
    [ndr] = store.inbox("bob")
    assert ndr.type == "error" and ndr.from_agent == "agentmaild" and mid in ndr.body
    assert await loop.step() is StepResult.IDLE  # dead letters are not claimed again
    assert store.retry_dead(agent="alice") == [dead.delivery_id]
    channel.fail_next = 0
    assert await loop.step() is StepResult.DELIVERED
    assert channel.delivered[0][0].delivery_id == dead.delivery_id


async def test_run_waits_for_wake_and_stops(store: SqliteMailStore, mailer: Mailer) -> None:
    channel = FakeChannel()
    agent = store.get_agent("alice")
    assert agent is not None
    loop = DeliveryLoop(agent, channel, AsyncMailStore(store), mailer, SETTINGS, gated=True)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.run)
            event = channel.event
            send(mailer)
            loop.wake()
            await event.wait()
            loop.stop()
    assert len(channel.delivered) == 1
    assert loop.state == "stopped"


async def test_a_busy_spell_keeps_its_start_and_is_warned_about_once(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    send(mailer)
    channel = FakeChannel(busy=True)
    clock = Clock()
    loop = make_loop(store, mailer, channel, clock, replace(SETTINGS, busy_warn_after_s=3.0))
    assert await loop.step() is StepResult.BUSY
    clock.now += 2.0
    assert await loop.step() is StepResult.BUSY  # the same spell: its start stays
    row = loop.snapshot()
    assert (row["busy_reason"], row["busy_for_s"], row["stuck"]) == ("busy", 2.0, False)
    with capture_logs() as logs:
        loop.check_busy()
        clock.now += 1.0
        loop.check_busy()
        clock.now += 5.0
        loop.check_busy()
    [warned] = [e for e in logs if e["event"] == "delivery.busy_long"]
    assert warned["reason"] == "busy" and warned["busy_for_s"] == 3.0
    assert loop.snapshot()["stuck"] is True
    loop.pause()
    assert await loop.step() is StepResult.PAUSED
    row = loop.snapshot()
    assert (row["busy_reason"], row["busy_for_s"], row["stuck"]) == ("paused", None, False)
    loop.resume()
    assert await loop.step() is StepResult.BUSY  # a new spell, warned about anew
    clock.now += 3.0
    with capture_logs() as logs:
        loop.check_busy()
    assert [e["event"] for e in logs] == ["delivery.busy_long"]


class AckFailsOnce(AsyncMailStore):
    """The real store, but the first ack meets a failing disk (the store is not under test)."""

    acks = 0

    async def ack_delivery(self, delivery_id: str, **kw: Any) -> int:
        self.acks += 1
        if self.acks == 1:
            raise StoreError("store write failed: database or disk is full")
        return await super().ack_delivery(delivery_id, **kw)


async def test_a_long_turns_failed_ack_is_retried_within_its_extended_lease(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    mid = send(mailer)
    wall = Clock()
    settings = replace(SETTINGS, lease_s=0.3)

    def lease_until() -> float:
        row = store.connection.execute("SELECT lease_until FROM am_deliveries").fetchone()
        return float(row["lease_until"] or 0)

    async def long_turn(batch: Batch, text: str) -> None:
        assert batch.lease_until == pytest.approx(1000.3)
        wall.now = 1000.25  # the turn outlives its first lease, which the loop extends
        await wait_until(lambda: lease_until() > 1000.3, 10)
        wall.now = 1000.4  # past the first lease, within the extended one

    agent = store.get_agent("alice")
    assert agent is not None
    astore = AckFailsOnce(store)
    channel = FakeChannel(long_turn)
    loop = DeliveryLoop(agent, channel, astore, mailer, settings, clock=Clock(), wall=wall)
    with anyio.fail_after(10):
        assert await loop.step() is StepResult.DELIVERED
    assert astore.acks == 2
    message = store.get_message(mid)
    assert message is not None and message.read
