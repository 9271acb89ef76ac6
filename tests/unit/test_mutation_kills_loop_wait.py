"""How long the delivery loop waits: after each step result, while idle, and to keep its lease.

FakeChannel, real SQLite. Written against the survivors of ``make mutate``: the wait after each
step result (at once after a delivery; the backoff left after a failure; a wake-up only when
paused or gated and idle; the poll interval otherwise), an idle loop that sleeps rather than
spins, and a lease extended a third of a lease into the turn, not sooner. The bounds are one-sided:
a loaded machine only makes the loop later, which none of them forbids.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import pytest

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Batch
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.clock import Clock
from tests.support.waiting import wait_until

SETTINGS = LoopSettings(lease_s=30.0, poll_interval_s=7.0, backoff_jitter=0.0)


class CountingChannel(FakeChannel):
    """Counts the steps that asked whether the agent is busy (every step that gets that far)."""

    steps = 0

    async def is_busy(self) -> bool:
        self.steps += 1
        return await super().is_busy()


def make_loop(
    store: SqliteMailStore, channel: FakeChannel, settings: LoopSettings = SETTINGS, **kw: Any
) -> DeliveryLoop:
    agent = store.get_agent("alice")
    assert agent is not None
    return DeliveryLoop(agent, channel, AsyncMailStore(store), Mailer(store), settings, **kw)


@pytest.mark.parametrize(
    ("result", "gated", "wait"),
    [
        (StepResult.DELIVERED, False, 0),
        (StepResult.DEAD, True, 0),
        (StepResult.PAUSED, False, None),
        (StepResult.PAUSED, True, None),
        (StepResult.IDLE, True, None),
        (StepResult.IDLE, False, 7.0),
        (StepResult.BUSY, True, 7.0),
        (StepResult.BUSY, False, 7.0),
        (StepResult.CANCELLED, True, 7.0),
    ],
)
def test_the_wait_after_each_step_result(
    store: SqliteMailStore, result: StepResult, gated: bool, wait: float | None
) -> None:
    loop = make_loop(store, FakeChannel(), gated=gated, clock=Clock(100.0))
    assert loop._wait_after(result) == wait


@pytest.mark.parametrize("result", [StepResult.FAILED, StepResult.TIMEOUT, StepResult.BACKOFF])
def test_after_a_failure_the_loop_waits_out_the_backoff_left(
    store: SqliteMailStore, result: StepResult
) -> None:
    clock = Clock(100.0)
    loop = make_loop(store, FakeChannel(), clock=clock)
    loop.backoff_until = 101.0
    assert loop._wait_after(result) == 1.0
    clock.now = 102.0  # already over: step again almost at once
    assert loop._wait_after(result) == 0.001


@pytest.mark.parametrize("gated", [True, False])
async def test_an_idle_loop_sleeps_rather_than_spins(store: SqliteMailStore, gated: bool) -> None:
    channel = CountingChannel()
    # A poll interval of exactly 1 s; gated, an idle loop waits for a wake-up only.
    loop = make_loop(store, channel, replace(SETTINGS, poll_interval_s=1.0), gated=gated)
    async with anyio.create_task_group() as tg:
        tg.start_soon(loop.run)
        await wait_until(lambda: loop.state == "idle")
        with anyio.move_on_after(0.5):  # a spinning loop steps thousands of times in this
            await wait_until(lambda: channel.steps >= 3)
        assert channel.steps == 1
        loop.wake()
        await wait_until(lambda: channel.steps == 2)  # a wake-up steps at once
        loop.stop()


async def test_the_lease_is_first_extended_a_third_of_a_lease_in(store: SqliteMailStore) -> None:
    Mailer(store).send(sender="bob", to="alice", subject="s", body="b")
    extended: list[float] = []

    def lease_until(delivery_id: str) -> float:
        row = store.connection.execute(
            "SELECT lease_until FROM am_deliveries WHERE id = ?", (delivery_id,)
        ).fetchone()
        return float(row["lease_until"])

    async def handler(batch: Batch, text: str) -> None:
        await wait_until(lambda: lease_until(batch.delivery_id) > batch.lease_until, 10)
        extended.append(lease_until(batch.delivery_id) - batch.lease_until)

    loop = make_loop(store, FakeChannel(handler), replace(SETTINGS, lease_s=0.9))
    assert await loop.step() is StepResult.DELIVERED
    # Extended at (claim + at least 0.3 s) to that moment + a lease: never sooner than a third.
    assert extended[0] >= 0.29
