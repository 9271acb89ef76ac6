"""The daemon's look for mail read elsewhere on a read-only connection of its own
(``store.looks``): it answers in the event loop's thread without a call to the store, sees what
another connection committed a moment before, and hands the question to the store when it
cannot answer."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Batch
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore

SETTINGS = LoopSettings(poll_interval_s=0.01, lease_s=30.0, max_attempts=3)


def _read_elsewhere(db: Path, message_id: str) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE messages SET read = 1 WHERE id = ?", (message_id,))
    conn.close()


class ReadAfterClaim(AsyncMailStore):
    """The daemon's store (inline writes, looks of its own); another tool reads ``taken`` right
    after each claim commits, as ``ov mail check`` may."""

    def __init__(self, sync: SqliteMailStore, db: Path, taken: str) -> None:
        super().__init__(sync, inline_writes=True)
        self.db, self.taken = db, taken

    async def claim(self, agent: str, **kw: Any) -> Batch | None:
        batch = await super().claim(agent, **kw)
        _read_elsewhere(self.db, self.taken)
        return batch


def _store(tmp_path: Path) -> tuple[Path, SqliteMailStore, list[str]]:
    db = tmp_path / "mail.db"
    sync = SqliteMailStore(db)
    sync.add_agent(Agent(name="bob", capability="builder", channel="spawn"))
    mailer = Mailer(sync)
    ids = [mailer.send(sender="lead", to="bob", subject=s, body=f"BODY-{s}").ids[0]
           for s in ("one", "two")]  # fmt: skip
    return db, sync, ids


async def test_the_look_sees_a_read_elsewhere_without_a_store_call(tmp_path: Path) -> None:
    db, sync, (first, second) = _store(tmp_path)
    store = ReadAfterClaim(sync, db, first)
    agent = sync.get_agent("bob")
    assert agent is not None
    channel = FakeChannel()
    loop = DeliveryLoop(agent, channel, store, Mailer(sync), SETTINGS)
    with anyio.fail_after(30):
        assert await loop.step() is StepResult.DELIVERED
    ((batch, text),) = channel.delivered
    assert batch.message_ids == (first, second)
    assert "BODY-two" in text and "BODY-one" not in text and first in text  # the note names it
    # The look never reached the store's connection; the one quick read is the loop's first
    # look at the agent's budget (delivery.budget_gate).
    assert store.hops.inline == 1
    m = sync.get_message(first)
    assert m is not None and m.acked_by == "elsewhere"
    await store.aclose()


async def test_a_look_that_cannot_answer_asks_the_store(tmp_path: Path) -> None:
    db, sync, (first, second) = _store(tmp_path)
    store = AsyncMailStore(sync, inline_writes=True)
    assert store._looks is not None
    assert await store.unread_among([first, second, "msg-none"]) == {first, second}
    _read_elsewhere(db, first)
    assert await store.unread_among([first, second]) == {second}
    assert store.hops.inline == 0
    store._looks.close()  # gone: every look now fails at once and the store answers
    assert await store.unread_among([first, second]) == {second}
    assert store.hops.inline == 1
    await store.aclose()


async def test_only_the_daemons_store_opens_looks(tmp_path: Path) -> None:
    _db, sync, _ids = _store(tmp_path)
    store = AsyncMailStore(sync)
    assert store._looks is None
    await store.aclose()
