"""The loop's re-check for mail read elsewhere (issue 18): its log line, note and shields.

Another tool marks a claimed message read through its own SQLite connection, as Overstory's
``ov mail check`` does. A cancellation that arrives while the loop looks again must still leave
the claimed batch settled: released for a later turn, or acked when nothing was left to show.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.elsewhere import note
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore

SETTINGS = LoopSettings(poll_interval_s=0.01, lease_s=30.0, max_attempts=3)


class GatedLook(AsyncMailStore):
    """The real store; the loop's look for mail read elsewhere waits at a gate the test opens."""

    def __init__(self, store: SqliteMailStore, before_look: Callable[[], object]) -> None:
        super().__init__(store)
        self.before_look = before_look
        self.looking, self.gate = anyio.Event(), anyio.Event()

    async def run_sync(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if getattr(fn, "__name__", "") == "look":
            self.before_look()
            self.looking.set()
            await self.gate.wait()
        return await super().run_sync(fn, *args, **kwargs)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "mail.db"
    s = SqliteMailStore(path)
    s.add_agent(Agent(name="bob", capability="builder", channel="spawn"))
    s.close()
    return path


def read_elsewhere(db: Path, *ids: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.executemany("UPDATE messages SET read = 1 WHERE id = ?", [(i,) for i in ids])
    conn.close()


def delivery_states(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT state FROM am_deliveries")]
    finally:
        conn.close()


def make_loop(store: AsyncMailStore, channel: FakeChannel) -> DeliveryLoop:
    agent = store.sync.get_agent("bob")
    assert agent is not None
    return DeliveryLoop(agent, channel, store, Mailer(store.sync), SETTINGS)


async def test_the_read_elsewhere_line_names_the_delivery_and_the_ids(db: Path) -> None:
    sync = SqliteMailStore(db)
    mailer = Mailer(sync)
    first = mailer.send(sender="lead", to="bob", subject="one", body="BODY-ONE").ids[0]
    second = mailer.send(sender="lead", to="bob", subject="two", body="BODY-TWO").ids[0]
    store = GatedLook(sync, lambda: read_elsewhere(db, first))
    store.gate.set()
    channel = FakeChannel()
    with capture_logs() as logs, anyio.fail_after(30):
        assert await make_loop(store, channel).step() is StepResult.DELIVERED
    ((batch, text),) = channel.delivered
    [line] = [e for e in logs if e["event"] == "delivery.read_elsewhere"]
    assert line == {
        "event": "delivery.read_elsewhere",
        "log_level": "info",
        "agent": "bob",
        "delivery_id": batch.delivery_id,
        "ids": [first],
    }
    assert text.startswith(note([first])) and "BODY-TWO" in text and "BODY-ONE" not in text
    assert batch.message_ids == (first, second)
    sync.close()


async def _cancel_while_looking(store: GatedLook, loop: DeliveryLoop) -> None:
    scope = anyio.CancelScope()

    async def run() -> None:
        with scope:
            await loop.step()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await store.looking.wait()
            scope.cancel()
            store.gate.set()
    assert scope.cancel_called


async def test_a_cancel_during_the_look_leaves_the_batch_settled_not_claimed(db: Path) -> None:
    sync = SqliteMailStore(db)
    Mailer(sync).send(sender="lead", to="bob", subject="s", body="b")
    store = GatedLook(sync, lambda: None)
    await _cancel_while_looking(store, make_loop(store, FakeChannel()))
    # Delivered or given back (which depends on where the channel first yields), never left
    # claimed until its lease runs out.
    assert delivery_states(db) in (["acked"], ["pending"])
    sync.close()


async def test_a_cancel_during_the_look_still_acks_a_batch_read_entirely_elsewhere(
    db: Path,
) -> None:
    sync = SqliteMailStore(db)
    mid = Mailer(sync).send(sender="lead", to="bob", subject="s", body="b").ids[0]
    store = GatedLook(sync, lambda: read_elsewhere(db, mid))
    channel = FakeChannel()
    await _cancel_while_looking(store, make_loop(store, channel))
    assert channel.attempts == [] and delivery_states(db) == ["acked"]
    m = sync.get_message(mid)
    assert m is not None and m.acked_by == "elsewhere"
    sync.close()
