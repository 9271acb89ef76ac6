"""The delivery history the loop writes: one ``am_attempts`` row per settled attempt."""

from __future__ import annotations

from dataclasses import replace

import anyio
from structlog.testing import capture_logs

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.errors import AgentUnavailable, DeliveryFailed
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Batch
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.clock import Clock

SETTINGS = LoopSettings(lease_s=30.0, max_attempts=3, backoff_initial_s=1.0, backoff_jitter=0.0)
WALL = 1_700_000_000.0


def send(store: SqliteMailStore) -> str:
    return Mailer(store).send(sender="bob", to="alice", subject="s", body="b").ids[0]


def make_loop(
    store: SqliteMailStore, channel: FakeChannel, clock: Clock, settings: LoopSettings = SETTINGS
) -> DeliveryLoop:
    agent = store.get_agent("alice")
    assert agent is not None
    return DeliveryLoop(
        agent,
        channel,
        AsyncMailStore(store),
        Mailer(store),
        settings,
        clock=clock,
        wall=Clock(WALL),
    )


def outcomes(store: SqliteMailStore) -> list[tuple[int, str, str | None]]:
    return [(a.attempt, a.outcome, a.error) for a in store.list_attempts(agent="alice")]


async def test_failures_then_success_write_one_row_each(store: SqliteMailStore) -> None:
    mid = send(store)
    clock = Clock(100.0)

    async def slow(batch: Batch, text: str) -> None:
        clock.now += 0.5  # the injection takes half a second on the loop's clock

    channel = FakeChannel(slow)
    channel.fail_next = 2
    loop = make_loop(store, channel, clock)
    for expected in (StepResult.FAILED, StepResult.FAILED, StepResult.DELIVERED):
        assert await loop.step() is expected
        clock.now = loop.backoff_until or clock.now
    assert outcomes(store) == [
        (3, "acked", None),
        (2, "failed", "scripted failure"),
        (1, "failed", "scripted failure"),
    ]
    acked = store.list_attempts()[0]
    assert acked.delivery_id == channel.attempts[0].delivery_id
    assert acked.message_ids == (mid,)
    assert (acked.duration_s, acked.at) == (0.5, WALL)
    assert store.get_message(mid).acked_by == acked.delivery_id  # type: ignore[union-attr]


async def test_the_last_allowed_failure_is_recorded_dead(store: SqliteMailStore) -> None:
    send(store)
    channel = FakeChannel()
    channel.fail_next = 99
    clock = Clock(100.0)
    loop = make_loop(store, channel, clock)
    for _ in range(3):
        await loop.step()
        clock.now = loop.backoff_until
    assert [o for _, o, _ in outcomes(store)] == ["dead", "failed", "failed"]
    assert len(store.dead_letters("alice")) == 1


async def test_unavailable_timeout_and_abort_have_their_outcomes(store: SqliteMailStore) -> None:
    send(store)
    started = anyio.Event()

    async def gone(batch: Batch, text: str) -> None:
        raise AgentUnavailable("pane is gone")

    async def hang(batch: Batch, text: str) -> None:
        await anyio.sleep_forever()

    async def hang_until_aborted(batch: Batch, text: str) -> None:
        started.set()
        await anyio.sleep_forever()

    clock = Clock(100.0)
    settings = replace(SETTINGS, max_attempts=9, deliver_timeout_s=0.05)
    channel = FakeChannel(gone)
    loop = make_loop(store, channel, clock, settings)
    assert await loop.step() is StepResult.UNAVAILABLE
    clock.now = loop.backoff_until
    channel.handler = hang
    with anyio.fail_after(30):
        assert await loop.step() is StepResult.TIMEOUT
    clock.now = loop.backoff_until
    loop.settings = replace(settings, deliver_timeout_s=None)
    channel.handler = hang_until_aborted
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.step)
            await started.wait()
            loop.abort()
    assert outcomes(store) == [
        (3, "released", "cancelled"),
        (2, "failed", "no confirmation within 0.05s"),
        (1, "unavailable", "pane is gone"),
    ]


async def test_a_history_row_that_cannot_be_written_never_fails_the_ack(
    store: SqliteMailStore,
) -> None:
    mid = send(store)
    store.connection.execute("DROP TABLE am_attempts")
    loop = make_loop(store, FakeChannel(), Clock(100.0))
    with capture_logs() as logs:
        assert await loop.step() is StepResult.DELIVERED
    assert store.get_message(mid).read  # type: ignore[union-attr]
    assert store.counts() == {}
    [lost] = [e for e in logs if e["event"] == "store.attempt_unrecorded"]
    assert "am_attempts" in lost["error"]


async def test_an_attempt_whose_claim_was_reaped_is_still_recorded(store: SqliteMailStore) -> None:
    send(store)

    async def reaped_then_failed(batch: Batch, text: str) -> None:
        # The lease was lost meanwhile (a reap): the release finds no claim to give back.
        store.reap_expired(now=WALL, everything=True)
        raise DeliveryFailed("too late")

    loop = make_loop(store, FakeChannel(reaped_then_failed), Clock(100.0))
    assert await loop.step() is StepResult.FAILED
    assert outcomes(store) == [(1, "failed", "too late")]
