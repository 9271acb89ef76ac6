"""Schema 6's ``am_send_one``: the common send in one statement. It writes exactly what the
general send writes when every check passes, and nothing at all when one does not (the store
then runs the general send, whose answers the contract suite checks)."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from agentmaild.errors import InboxFull, RecipientRefused
from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Message
from agentmaild.store.guard import ThreadGuard
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.records import InsertRequest
from agentmaild.store.send import send_one_params
from tests.support.waiting import wait_for

NOW = 1_700_000_000.0


def _msg(to: str = "demo", subject: str = "s") -> Message:
    return Message(id=new_id("msg"), from_agent="lead", to_agent=to, subject=subject, body="b",
                   created_at=iso_now(NOW))  # fmt: skip


def _req(m: Message, **kw: Any) -> InsertRequest:
    fields: dict[str, Any] = {"messages": (m,), "now": NOW, "check_recipients": (m.to_agent,),
                              "unread_max": 2, "collapse": (f"digest-{m.id}", 60.0)}  # fmt: skip
    return InsertRequest(**{**fields, **kw})


def send_one(store: PostgresMailStore, params: dict[str, Any]) -> bool:
    """True when the one-statement send sent; False when it wrote nothing."""
    row = store.db.single("send_one", params)
    return row is not None and row["outcome"] == "sent"


def _counts(dsn: str) -> tuple[int, ...]:
    tables = ("messages", "am_recent_sends", "am_nudges")
    with psycopg.connect(dsn) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)  # type: ignore[index]


def test_what_the_general_send_is_kept_for() -> None:
    m = _msg()
    assert send_one_params(_req(m)) is not None
    assert send_one_params(_req(m, nudges=(("demo", m.id, "high status"),))) is not None
    guard = ThreadGuard(thread_id="t", pair="a|b", max_messages=3, window_s=60.0,
                        escalation=_msg("operator"))  # fmt: skip
    for general in (
        _req(m, idempotency=("lead", "k", "h")),
        _req(m, rate_limit_max=5),
        _req(m, thread_guard=guard),
        _req(m, known_elsewhere=(("demo", "working"),)),
        InsertRequest(messages=(m, _msg("other")), now=NOW),
        _req(m, nudges=(("other", m.id, "high status"),)),
    ):
        assert send_one_params(general) is None


def test_it_writes_only_when_every_check_passes(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn)
    listener = psycopg.connect(pg_dsn, autocommit=True)
    try:
        listener.execute("LISTEN agentmaild_mail")
        store.add_agent(Agent(name="demo", capability="builder"))
        store.add_agent(Agent(name="gone", capability="builder"))
        store.set_agent_state("gone", "completed", force=True)
        first = _msg()
        nudge = (("demo", first.id, "high status"),)
        assert send_one(store, send_one_params(_req(first, nudges=nudge)) or {})
        assert _counts(pg_dsn) == (1, 1, 1)
        notes = list(listener.notifies(timeout=5.0, stop_after=1))
        assert [n.payload for n in notes] == ["demo"]
        assert store.take_nudges("demo")[0]["reason"] == "high status"
        # A repeat inside the window, an unknown or ended recipient: nothing written.
        repeat = replace(_msg(), id=new_id("msg"))
        refused = [
            _req(repeat, collapse=(f"digest-{first.id}", 60.0)),
            _req(_msg("nobody")),
            _req(_msg("gone")),
        ]
        for req in refused:
            assert not send_one(store, send_one_params(req) or {})
        assert _counts(pg_dsn) == (1, 1, 0)
        assert send_one(store, send_one_params(_req(_msg())) or {})  # the second of 2
        assert not send_one(store, send_one_params(_req(_msg())) or {})  # the inbox is full
        assert _counts(pg_dsn) == (2, 2, 0)
        # Through the store, each of those gets the general send's answer.
        with pytest.raises(InboxFull):
            store.insert(_req(_msg()))
        with pytest.raises(RecipientRefused, match="completed"):
            store.insert(_req(_msg("gone")))
        again = store.insert(_req(repeat, collapse=(f"digest-{first.id}", 60.0)))
        assert again.collapsed and [x.id for x in again.messages] == [first.id]
        assert store.rule_counters()["collapsed"] == 1
        assert store.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    finally:
        listener.close()
        store.close()


def _advisory_lock_waits(conn: psycopg.Connection[Any]) -> int:
    """How many backends of this database wait on an advisory lock now."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND wait_event = 'advisory'").fetchone()  # fmt: skip
    return int(row[0]) if row is not None else 0


@pytest.mark.parametrize("ending", [
    "UPDATE am_agents SET state = 'completed' WHERE name = 'demo'",
    "DELETE FROM am_agents WHERE name = 'demo'",
], ids=["ends", "removed"])  # fmt: skip
@pytest.mark.parametrize("path", [{}, {"idempotency": ("lead", "k", "h")}],
                         ids=["one-statement", "general"])  # fmt: skip
def test_a_send_waits_for_its_recipients_ending_and_is_then_refused(
    pg_dsn: str, ending: str, path: dict[str, Any]
) -> None:
    """Schema 9: no row lock on the recipient; the ending's trigger takes the inbox lock the send
    checks under, so a send racing an ending in flight waits for it and sees it. Uncapped, so the
    lock is there for the check alone."""
    store = PostgresMailStore(pg_dsn)
    ender = psycopg.connect(pg_dsn)  # not autocommit: the ending stays open until committed
    try:
        store.add_agent(Agent(name="demo", capability="builder"))
        ender.execute(ending)
        outcome: list[object] = []

        def send() -> None:
            try:
                outcome.append(store.insert(_req(_msg(), unread_max=0, **path)))
            except RecipientRefused as exc:
                outcome.append(exc)

        sender = threading.Thread(target=send)
        sender.start()
        with psycopg.connect(pg_dsn, autocommit=True) as watcher:
            wait_for(lambda: _advisory_lock_waits(watcher), 10.0, "the send to wait on its lock")
        assert sender.is_alive() and outcome == []
        ender.commit()
        sender.join(timeout=10.0)
        assert not sender.is_alive()
        [refused] = outcome
        assert isinstance(refused, RecipientRefused)
        assert _counts(pg_dsn) == (0, 0, 0)
    finally:
        ender.close()
        store.close()
