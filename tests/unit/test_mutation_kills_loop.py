"""The delivery loop's figures and canonical log lines, whole: FakeChannel, real SQLite.

Written against the survivors of ``make mutate``: each attempt's one log line (event, level and
every field), the ``status`` snapshot before, during and after a delivery, the wait after each
step result, and the lease kept alive through a long turn.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.errors import AgentBusy, AgentUnavailable
from agentmaild.ids import iso_now
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Batch
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.clock import Clock
from tests.support.waiting import wait_until

SETTINGS = LoopSettings(
    lease_s=30.0, max_attempts=2, backoff_initial_s=1.0, backoff_max_s=10.0, backoff_jitter=0.0
)
WALL = 1_700_000_000.0


def send(store: SqliteMailStore, n: int = 1) -> list[str]:
    mailer = Mailer(store)
    # Distinct bodies: identical mail inside the loop guard's window would collapse into one.
    sent = (mailer.send(sender="bob", to="alice", subject="s", body=f"b{i}") for i in range(n))
    return [s.ids[0] for s in sent]


def make_loop(
    store: SqliteMailStore,
    channel: FakeChannel,
    clock: Clock | None = None,
    settings: LoopSettings = SETTINGS,
    **kw: Any,
) -> DeliveryLoop:
    agent = store.get_agent("alice")
    assert agent is not None
    if clock is not None:
        kw.update(clock=clock, wall=Clock(WALL))
    return DeliveryLoop(agent, channel, AsyncMailStore(store), Mailer(store), settings, **kw)


def lines(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"].startswith("delivery.")]


IDLE_SNAPSHOT = {
    "state": "idle", "busy": False, "busy_reason": None, "busy_for_s": None, "stuck": False,
    "paused": False, "in_flight_delivery": None, "failures": 0, "backoff_s": 0.0,
    "backoff_until": None, "last_delivery": None, "last_error": None, "delivered_total": 0,
    "failed_total": 0, "dead_total": 0,
}


async def test_a_delivery_is_one_acked_line_and_its_figures(store: SqliteMailStore) -> None:
    send(store)
    clock = Clock(100.0)
    during: list[dict[str, Any]] = []

    async def handler(batch: Batch, text: str) -> None:
        clock.now += 2.5
        during.append(loop.snapshot())

    loop = make_loop(store, FakeChannel(handler), clock)
    with capture_logs() as logs:
        assert await loop.step() is StepResult.DELIVERED
    [batch] = [b for b, _ in loop.channel.delivered]  # type: ignore[attr-defined]
    assert during == [{
        **IDLE_SNAPSHOT, "state": "delivering", "busy": True, "busy_reason": "in turn",
        "busy_for_s": 2.5, "in_flight_delivery": batch.delivery_id,
    }]
    assert lines(logs) == [{
        "event": "delivery.acked", "log_level": "info", "agent": "alice", "acked": 1,
        "delivery_id": batch.delivery_id, "attempt": 1, "n_messages": 1, "duration_ms": 2500.0,
    }]
    last = {"delivery_id": batch.delivery_id, "result": "delivered", "at": iso_now(WALL),
            "attempt": 1, "n_messages": 1}
    # The state names the last step until the next one; the spell ended with the delivery.
    assert loop.snapshot() == {**IDLE_SNAPSHOT, "state": "delivering", "busy": True,
                               "last_delivery": last, "delivered_total": 1}
    [row] = store.list_attempts(agent="alice")
    assert row.duration_s == 2.5 and row.outcome == "acked" and row.at == WALL
    assert await loop.step() is StepResult.IDLE
    assert loop.snapshot() == {**IDLE_SNAPSHOT, "last_delivery": last, "delivered_total": 1}


async def test_a_failure_backs_off_then_the_last_one_is_dead(store: SqliteMailStore) -> None:
    send(store)
    clock = Clock(100.0)
    channel = FakeChannel()
    channel.fail_next = 2
    loop = make_loop(store, channel, clock)
    with capture_logs() as logs:
        assert await loop.step() is StepResult.FAILED
    [batch] = channel.attempts
    assert lines(logs) == [{
        "event": "delivery.failed", "log_level": "warning", "agent": "alice",
        "error": "scripted failure", "result": "failed", "backoff_s": 1.0,
        "delivery_id": batch.delivery_id, "attempt": 1, "n_messages": 1, "duration_ms": 0.0,
    }]
    snap = loop.snapshot()
    assert (snap["failures"], snap["backoff_s"], snap["backoff_until"]) == (
        1, 1.0, iso_now(WALL + 1.0))
    assert (snap["busy_reason"], snap["last_error"], snap["failed_total"]) == (
        "backoff", "scripted failure", 1)
    assert await loop.step() is StepResult.BACKOFF and loop.state == "backoff"
    clock.now += 1.0
    with capture_logs() as logs:
        assert await loop.step() is StepResult.DEAD
    assert lines(logs)[0] == {
        "event": "delivery.dead", "log_level": "error", "agent": "alice",
        "error": "scripted failure", "failures": 2, "delivery_id": batch.delivery_id,
        "attempt": 2, "n_messages": 1, "duration_ms": 0.0,
    }
    snap = loop.snapshot()
    assert (snap["failures"], snap["backoff_s"], snap["dead_total"], snap["failed_total"]) == (
        0, 0.0, 1, 2)
    [ndr] = [m for m in store.inbox("bob") if m.from_agent == "agentmaild"]
    assert "1 message(s) failed 2 times: scripted failure" in ndr.body


@pytest.mark.parametrize(
    ("exc", "result", "event", "counted"),
    [
        (AgentBusy("turned busy"), StepResult.BUSY, "delivery.busy", False),
        (AgentUnavailable("pane gone"), StepResult.UNAVAILABLE, "delivery.unavailable", True),
        (KeyError("bug"), StepResult.FAILED, "delivery.failed", True),
    ],
)
async def test_each_channel_error_has_its_result_and_line(
    store: SqliteMailStore, exc: Exception, result: StepResult, event: str, counted: bool
) -> None:
    send(store)

    async def handler(batch: Batch, text: str) -> None:
        raise exc

    loop = make_loop(store, FakeChannel(handler), Clock(100.0))
    with capture_logs() as logs:
        assert await loop.step() is result
    [line] = [e for e in lines(logs) if e["event"] != "delivery.channel_crashed"]
    error = "KeyError: 'bug'" if isinstance(exc, KeyError) else str(exc)
    assert line["event"] == event and line["error"] == error
    [row] = store.list_attempts(agent="alice")
    assert row.error == error and row.duration_s == 0.0
    counted_in_store = store.connection.execute("SELECT failures FROM am_deliveries").fetchone()
    assert counted_in_store[0] == (1 if counted else 0)
    snap = loop.snapshot()
    assert snap["failures"] == (1 if counted else 0)
    assert snap["last_error"] == error and snap["last_delivery"]["result"] == result.value
    if isinstance(exc, KeyError):
        [crash] = [e for e in logs if e["event"] == "delivery.channel_crashed"]
        assert crash["delivery_id"] == line["delivery_id"] and crash["log_level"] == "error"
    if result is StepResult.UNAVAILABLE:
        assert line["result"] == "unavailable" and line["log_level"] == "warning"
        assert snap["busy_reason"] == "unavailable: pane gone"


async def test_an_abort_is_cancelled_or_abandoned(store: SqliteMailStore) -> None:
    send(store)
    started = anyio.Event()

    async def handler(batch: Batch, text: str) -> None:
        started.set()
        await anyio.sleep_forever()

    loop = make_loop(store, FakeChannel(handler), Clock(100.0))
    with capture_logs() as logs, anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.step)
            await started.wait()
            loop.abort("agent removed")
    [line] = lines(logs)
    assert line["event"] == "delivery.abandoned" and line["reason"] == "agent removed"
    assert loop.snapshot()["last_error"] == "agent removed"
    [row] = store.list_attempts(agent="alice")
    assert (row.outcome, row.error) == ("released", "agent removed")
    assert loop.snapshot()["state"] == "stopping" or loop.stopping


async def test_a_plain_abort_is_a_cancelled_line(store: SqliteMailStore) -> None:
    send(store)
    started = anyio.Event()

    async def handler(batch: Batch, text: str) -> None:
        started.set()
        await anyio.sleep_forever()

    loop = make_loop(store, FakeChannel(handler), Clock(100.0))
    with capture_logs() as logs, anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.step)
            await started.wait()
            loop.abort()
    [line] = lines(logs)
    assert line["event"] == "delivery.cancelled" and line["error"] == "cancelled"
    assert store.list_attempts(agent="alice")[0].error == "cancelled"
    assert await loop.step() is StepResult.PAUSED and loop.state == "stopping"


async def test_paused_then_resumed_state(store: SqliteMailStore) -> None:
    loop = make_loop(store, FakeChannel(), Clock(100.0))
    loop.pause()
    assert await loop.step() is StepResult.PAUSED and loop.state == "paused"
    assert loop.snapshot()["busy_reason"] == "paused" and loop.snapshot()["paused"] is True
    loop.resume()
    assert loop.paused is False
    assert await loop.step() is StepResult.IDLE


async def test_busy_state_and_reason(store: SqliteMailStore) -> None:
    send(store)
    channel = FakeChannel(busy=True)
    clock = Clock(100.0)
    loop = make_loop(store, channel, clock, replace(SETTINGS, busy_warn_after_s=3.0))
    assert await loop.step() is StepResult.BUSY
    assert loop.state == "busy" and loop.snapshot()["busy"] is True
    assert loop.snapshot()["busy_reason"] == "busy"
    clock.now += 3.0
    assert loop.snapshot()["stuck"] is True  # exactly busy_warn_after_s is stuck


async def test_retry_now_drops_the_backoff(store: SqliteMailStore) -> None:
    send(store)
    channel = FakeChannel()
    channel.fail_next = 1
    loop = make_loop(store, channel, Clock(100.0))
    assert await loop.step() is StepResult.FAILED
    loop.retry_now()
    assert (loop.failures, loop.backoff_until) == (0, 0.0)
    assert await loop.step() is StepResult.DELIVERED
    assert loop.snapshot()["last_error"] == "scripted failure"  # kept past the success


async def test_a_fresh_loop_is_starting_and_an_idle_abort_is_quiet(
    store: SqliteMailStore,
) -> None:
    loop = make_loop(store, FakeChannel(), Clock(100.0))
    assert loop.snapshot() == {**IDLE_SNAPSHOT, "state": "starting"}
    loop.abort()  # nothing in flight: nothing to cancel
    assert loop.stopping


async def test_an_outer_cancel_releases_with_reason_cancelled(store: SqliteMailStore) -> None:
    send(store)
    started = anyio.Event()

    async def handler(batch: Batch, text: str) -> None:
        started.set()
        await anyio.sleep_forever()

    loop = make_loop(store, FakeChannel(handler), Clock(100.0))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.step)
            await started.wait()
            tg.cancel_scope.cancel()
    [row] = store.list_attempts(agent="alice")
    assert (row.outcome, row.error) == ("released", "cancelled")


async def test_a_timeout_leaves_a_quick_delivery_alone(store: SqliteMailStore) -> None:
    send(store)
    loop = make_loop(store, FakeChannel(), Clock(100.0), replace(SETTINGS, deliver_timeout_s=5.0))
    assert await loop.step() is StepResult.DELIVERED


@pytest.mark.parametrize("seed", [1, 2])
async def test_the_backoff_is_jittered_around_its_base(store: SqliteMailStore, seed: int) -> None:
    import random

    send(store)
    channel = FakeChannel()
    channel.fail_next = 1
    settings = replace(SETTINGS, backoff_initial_s=0.5, backoff_jitter=0.2)
    loop = make_loop(store, channel, Clock(100.0), settings, rng=random.Random(seed))
    assert await loop.step() is StepResult.FAILED
    r = random.Random(seed).random()
    assert loop.snapshot()["backoff_s"] == round(0.5 * (1 + 0.2 * (2 * r - 1)), 3)


async def test_run_goes_on_at_once_after_a_delivery_and_after_a_backoff(
    store: SqliteMailStore,
) -> None:
    send(store, 3)
    channel = FakeChannel()
    channel.fail_next = 1
    settings = replace(SETTINGS, batch_max_messages=1, backoff_initial_s=0.05, max_attempts=5,
                       poll_interval_s=60.0)
    loop = make_loop(store, channel, settings=settings, gated=True)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.run)
            while len(channel.delivered) < 3:  # no wake-up: delivered, backoff, delivered...
                await channel.event.wait()
            loop.stop()
    assert loop.state == "stopped"
    assert loop.snapshot()["delivered_total"] == 3 and loop.snapshot()["failed_total"] == 1


async def test_an_ungated_idle_loop_polls(store: SqliteMailStore) -> None:
    loop = make_loop(store, FakeChannel(), settings=replace(SETTINGS, poll_interval_s=0.01))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.run)
            await wait_until(lambda: loop.state == "idle")
            send(store)  # nobody wakes it: the poll interval finds the mail
            while not loop.channel.delivered:  # type: ignore[attr-defined]
                await loop.channel.event.wait()  # type: ignore[attr-defined]
            loop.stop()


async def test_a_long_turn_keeps_its_lease(store: SqliteMailStore) -> None:
    send(store)
    settings = replace(SETTINGS, lease_s=0.5)
    kept: list[float] = []

    async def handler(batch: Batch, text: str) -> None:
        # Extended before the lease runs out (a third of the way in), by a whole lease.
        while not kept and time.time() < batch.lease_until - 0.05:
            await anyio.sleep(0.01)
            row = store.connection.execute(
                "SELECT lease_until FROM am_deliveries WHERE id = ?", (batch.delivery_id,)
            ).fetchone()
            if row["lease_until"] > batch.lease_until:
                kept.append(row["lease_until"] - batch.lease_until)

    loop = make_loop(store, FakeChannel(handler), settings=settings)
    assert await loop.step() is StepResult.DELIVERED
    assert kept, "the lease was not extended before it ran out"
    assert 0.1 < kept[0] < 0.5  # about a third of a lease later, plus a whole lease


async def test_a_lost_lease_is_logged_once(store: SqliteMailStore) -> None:
    send(store)
    settings = replace(SETTINGS, lease_s=0.15)
    lost = anyio.Event()

    async def handler(batch: Batch, text: str) -> None:
        store.reap_expired(now=time.time(), everything=True)  # another daemon took it back
        with anyio.fail_after(3):
            await lost.wait()

    loop = make_loop(store, FakeChannel(handler), settings=settings)
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.step)
            await wait_until(lambda: any(e["event"] == "delivery.lease_lost" for e in logs), 3)
            lost.set()
    [line] = [e for e in logs if e["event"] == "delivery.lease_lost"]
    assert line["delivery_id"] and line["log_level"] == "warning"
