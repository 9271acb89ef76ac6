"""Mid-turn claims (``store.midturn``) on either store, as a channel makes them
(``channels.midturn.MidTurn``: Codex's ``turn/steer``): the policy's mail only, under a delivery of
its own; an ack writes the history's ``mid-turn`` row and the daemon's claim never takes the mail
again; a refused batch is given back, in no delivery, for the turn's end; the daemon's batch in
flight is never taken. And ``interrupt`` mail is never taken mid-turn (on SQLite: the type is
forced past the schema's CHECK, which the interrupt change widens; the query is shared)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import anyio

from agentmaild.channels.midturn import MidTurn
from agentmaild.config import Config
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.location import StoreLocation
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.store_targets import StoreTarget


def _claim(store: object, agent: str) -> object:
    return store.claim(agent, max_messages=10, max_chars=10_000, lease_s=300,  # type: ignore[attr-defined]
                       now=time.time())  # fmt: skip


async def test_a_channels_mid_turn_claim_acks_once_and_gives_back(
    store_target: StoreTarget,
) -> None:
    store = store_target.open()
    try:
        agent = store.add_agent(Agent(name="erin", capability="builder"))
        mailer = Mailer(store)
        carried = mailer.send(sender="lead", to="erin", subject="job", body="JOB").ids[0]
        in_flight = _claim(store, "erin")  # the daemon's batch of the running turn
        assert in_flight is not None
        mid = MidTurn(agent, Config(), store_target.location)
        try:
            assert await mid.take() is None  # the turn's own batch is never taken
            normal = mailer.send(sender="lead", to="erin", subject="fyi", body="N").ids[0]
            assert await mid.take() is None  # normal mail waits (policy high)
            urgent = mailer.send(sender="lead", to="erin", subject="stop", body="URGENT-1",
                                 priority="urgent").ids[0]  # fmt: skip
            taken = await mid.take()
            assert taken is not None
            delivery_id, text, began = taken
            assert "URGENT-1" in text and f"(delivery {delivery_id})" in text
            await mid.give_back(delivery_id)  # refused: waits for the turn's end
            back = store.get_message(urgent)
            assert back is not None and not back.read and back.delivery_id is None
            again = await mid.take()
            assert again is not None and again[0] != delivery_id
            await mid.ack(again[0], again[2])
            history = [(a.delivery_id, a.outcome, a.message_ids)
                       for a in store.list_attempts(agent="erin")]  # fmt: skip
            assert history == [(again[0], "mid-turn", (urgent,))]
            acked = store.get_message(urgent)
            assert acked is not None and acked.read and acked.acked_by == again[0]
            assert store.ack_delivery(in_flight.delivery_id, now=time.time()) == 1  # type: ignore[attr-defined]
            after = _claim(store, "erin")  # the daemon's next claim: the normal mail alone
            assert after is not None and after.message_ids == (normal,)  # type: ignore[attr-defined]
            assert carried not in after.message_ids  # type: ignore[attr-defined]
            assert began <= time.time()
        finally:
            await mid.close()
    finally:
        store.close()


def test_interrupt_mail_is_never_taken_mid_turn(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    store = SqliteMailStore(db)
    try:
        agent = store.add_agent(Agent(name="erin", capability="builder"))
        sent = Mailer(store).send(sender="lead", to="erin", subject="stop", body="INT",
                                  priority="urgent").ids[0]  # fmt: skip
    finally:
        store.close()
    with sqlite3.connect(db) as conn:  # the type forced past the CHECK; the query is shared
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute("UPDATE messages SET type = 'interrupt' WHERE id = ?", (sent,))

    async def look() -> object:
        mid = MidTurn(agent, Config(), StoreLocation.of(str(db)))
        try:
            return await mid.take()
        finally:
            await mid.close()

    assert anyio.run(look) is None
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT read, delivery_id FROM messages WHERE id = ?", (sent,))
        assert row.fetchone() == (0, None)  # unread, in no delivery: it opens the next turn
