"""What the delivery loop types and logs, to the digit: FakeChannel, real SQLite, hand-set clocks.

Written against the survivors of ``make mutate``: the text carries the agent's name and cuts each
body at the batch's budget less the render overhead (never under 1000 characters); a delivery
timeout runs from the start of the turn; the logged and shown figures are rounded as documented;
a busy spell that outlasts its warning during a delivery names that delivery; a cancelled
release records how long the turn ran.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from structlog.testing import capture_logs

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Batch
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.clock import Clock

SETTINGS = LoopSettings(
    lease_s=30.0, max_attempts=3, backoff_initial_s=1.0, backoff_max_s=10.0, backoff_jitter=0.0
)


def make_loop(
    store: SqliteMailStore, channel: FakeChannel, settings: LoopSettings = SETTINGS, **kw: Any
) -> DeliveryLoop:
    agent = store.get_agent("alice")
    assert agent is not None
    kw.setdefault("clock", Clock(100.0))
    return DeliveryLoop(agent, channel, AsyncMailStore(store), Mailer(store), settings, **kw)


def send(store: SqliteMailStore, body: str = "b") -> str:
    return Mailer(store).send(sender="bob", to="alice", subject="s", body=body).ids[0]


@pytest.mark.parametrize(("max_chars", "kept"), [(2000, 1000), (4000, 2500)])
async def test_each_body_is_cut_at_the_budget_less_the_overhead(
    store: SqliteMailStore, max_chars: int, kept: int
) -> None:
    body = "".join(f"{i:05d}" for i in range(2000))  # 10,000 characters, no two cuts alike
    send(store, body)
    channel = FakeChannel()
    loop = make_loop(store, channel, replace(SETTINGS, batch_max_chars=max_chars))
    assert await loop.step() is StepResult.DELIVERED
    [(batch, text)] = channel.delivered
    head = f"[agentmail] 1 new message for alice (delivery {batch.delivery_id})"
    assert text.splitlines()[0] == head
    assert body[:kept] + "\n[... truncated" in text
    assert body[: kept + 1] not in text


async def test_a_delivery_timeout_runs_from_the_start_of_the_turn(store: SqliteMailStore) -> None:
    send(store)

    async def handler(batch: Batch, text: str) -> None:
        await anyio.lowlevel.checkpoint()  # a turn that yields once is not over its 60 s

    loop = make_loop(store, FakeChannel(handler), replace(SETTINGS, deliver_timeout_s=60.0))
    assert await loop.step() is StepResult.DELIVERED


async def test_logged_figures_are_rounded_as_documented(store: SqliteMailStore) -> None:
    send(store)
    clock = Clock(100.0)

    async def handler(batch: Batch, text: str) -> None:
        clock.now += 0.0012345  # 1.2345 ms
        raise KeyError("bug")  # counted: logged with its backoff

    settings = replace(SETTINGS, backoff_initial_s=0.5, backoff_jitter=0.2)
    rng = random.Random(7)
    delay = 0.5 * (1 + 0.2 * (2 * random.Random(7).random() - 1))
    assert round(delay, 3) != round(delay, 4)  # the seed gives a delay with a 4th decimal
    loop = make_loop(store, FakeChannel(handler), settings, clock=clock, rng=rng)
    with capture_logs() as logs:
        assert await loop.step() is StepResult.FAILED
    [line] = [e for e in logs if e["event"] == "delivery.failed"]
    assert line["duration_ms"] == 1.23 and line["backoff_s"] == round(delay, 3)


async def test_a_long_turn_warns_once_naming_its_delivery(store: SqliteMailStore) -> None:
    send(store)
    clock = Clock(100.0)
    seen: list[dict[str, Any]] = []

    async def handler(batch: Batch, text: str) -> None:
        clock.now += 2.46
        seen.append(loop.snapshot())
        loop.check_busy()  # not yet 3 s
        clock.now += 3.0
        loop.check_busy()
        loop.check_busy()  # once per spell

    settings = replace(SETTINGS, busy_warn_after_s=3.0)
    loop = make_loop(store, FakeChannel(handler), settings, clock=clock)
    with capture_logs() as logs:
        assert await loop.step() is StepResult.DELIVERED
    [batch] = loop.channel.attempts  # type: ignore[attr-defined]
    assert seen[0]["busy_for_s"] == 2.5 and seen[0]["stuck"] is False
    assert [e for e in logs if e["event"] == "delivery.busy_long"] == [{
        "event": "delivery.busy_long", "log_level": "warning", "agent": "alice",
        "reason": "in turn", "busy_for_s": 5.5, "delivery_id": batch.delivery_id,
    }]


async def test_a_busy_spell_warned_at_once_reports_zero(store: SqliteMailStore) -> None:
    channel = FakeChannel(busy=True)
    loop = make_loop(store, channel, replace(SETTINGS, busy_warn_after_s=0.0))
    assert await loop.step() is StepResult.BUSY
    with capture_logs() as logs:
        loop.check_busy()
    assert [(e["busy_for_s"], e["delivery_id"]) for e in logs] == [(0.0, None)]


async def test_a_cancelled_release_records_how_long_the_turn_ran(store: SqliteMailStore) -> None:
    send(store)
    clock = Clock(100.0)
    started = anyio.Event()

    async def handler(batch: Batch, text: str) -> None:
        clock.now += 2.0
        started.set()
        await anyio.sleep_forever()

    loop = make_loop(store, FakeChannel(handler), clock=clock)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.step)
            await started.wait()
            loop.abort()
    [row] = store.list_attempts(agent="alice")
    assert (row.outcome, row.duration_s) == ("released", 2.0)
