"""The statements of the hot store calls on SQLite (issue 15). A one-message send's three reads
before it writes (the repeat it would collapse into, the recipient's state, the unread cap) are
one statement, and it answers and writes exactly what the general insert does, case by case; a
claim of new mail looks once (live lease, pending redelivery, queues) before it writes; an ack
marks the batch's messages in one statement."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentmaild.errors import InboxFull, RecipientRefused
from agentmaild.ids import iso_now
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Batch, Message
from agentmaild.store.records import InsertRequest
from agentmaild.store.send import _insert_many, _insert_one
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.store.sqlite_tx import SqliteTx
from tests.support.stores import with_bob_and_ended_carol

NOW = 1_700_000_000.0
TABLES = ("messages", "am_recent_sends", "am_nudges", "am_counters")


def _msg(n: int, to: str = "bob") -> Message:
    return Message(id=f"msg-{n:04d}", from_agent="lead", to_agent=to, subject=f"s{n}", body="b",
                   created_at=iso_now(NOW))  # fmt: skip


def _req(m: Message, **kw: Any) -> InsertRequest:
    fields: dict[str, Any] = {"messages": (m,), "now": NOW, "check_recipients": (m.to_agent,),
                              "unread_max": 2, "collapse": ("digest-1", 60.0)}  # fmt: skip
    return InsertRequest(**{**fields, **kw})


@pytest.fixture
def template(tmp_path: Path) -> Path:
    """bob with one unread message (sent as digest-1), carol ended, nobody else registered."""
    db = tmp_path / "template.db"
    store = with_bob_and_ended_carol(db)
    store.insert(_req(_msg(1)))
    store.close()
    return db


CASES: dict[str, InsertRequest] = {
    "plain": _req(_msg(2), collapse=("digest-2", 60.0)),
    "a repeat collapses": _req(_msg(3)),
    "a repeat after its window": _req(_msg(4), now=NOW + 61),
    "no loop guard": _req(_msg(5), collapse=None),
    "the inbox reaches its cap": _req(_msg(6), collapse=("digest-6", 60.0), unread_max=1),
    "no cap": _req(_msg(7), collapse=("digest-7", 60.0), unread_max=0),
    "an unknown recipient": _req(_msg(8, to="zed"), collapse=("digest-8", 60.0)),
    "an unknown recipient, allowed": _req(
        _msg(9, to="zed"), collapse=("digest-9", 60.0), refuse_unknown=False
    ),
    "an ended recipient": _req(_msg(10, to="carol"), collapse=("digest-10", 60.0)),
    "ended in the other registry": _req(
        _msg(11), collapse=("digest-11", 60.0), known_elsewhere=(("bob", "completed"),)
    ),
    "not checked (a group member)": _req(
        _msg(12, to="carol"), collapse=("digest-12", 60.0), check_recipients=()
    ),
    "with a nudge": _req(
        _msg(13), collapse=("digest-13", 60.0), nudges=(("bob", "msg-0013", "high status"),)
    ),
    "a repeat is checked before the cap": _req(_msg(14), unread_max=1),
}


def _run(db: Path, insert: Any, req: InsertRequest) -> tuple[Any, list[list[tuple[Any, ...]]]]:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            r = insert(SqliteTx(conn), req)
            answer: Any = (r.duplicate, r.collapsed, r.held, [m.id for m in r.messages])
            conn.execute("COMMIT")
        except (InboxFull, RecipientRefused) as exc:
            conn.execute("ROLLBACK")
            answer = (type(exc).__name__, str(exc))
        rows = [
            [tuple(row) for row in conn.execute(f"SELECT * FROM {t} ORDER BY 1")] for t in TABLES
        ]
        return answer, rows
    finally:
        conn.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_one_message_send_answers_and_writes_what_the_general_one_does(
    template: Path, tmp_path: Path, case: str
) -> None:
    one, many = tmp_path / "one.db", tmp_path / "many.db"
    shutil.copy(template, one)
    shutil.copy(template, many)
    answer, rows = _run(one, _insert_one, CASES[case])
    assert (answer, rows) == _run(many, _insert_many, CASES[case])
    assert answer != ()  # every case got an answer of one of the two kinds


def test_the_cases_cover_each_outcome(template: Path, tmp_path: Path) -> None:
    answers = []
    for n, req in enumerate(CASES.values()):
        db = tmp_path / f"{n}.db"
        shutil.copy(template, db)
        answers.append(_run(db, _insert_one, req)[0])
    kinds = {a[0] if isinstance(a[0], str) else "collapsed" if a[1] else "written" for a in answers}
    assert kinds == {"InboxFull", "RecipientRefused", "collapsed", "written"}


def _heads(conn: sqlite3.Connection, call: Callable[[], Any]) -> list[str]:
    """The first word of each statement ``call`` ran, in order (SQLite reports a statement again
    for each trigger it fires: those repeats are left out)."""
    seen: list[str] = []
    conn.set_trace_callback(lambda sql: None if seen and seen[-1] == sql else seen.append(sql))
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    return [s.split(None, 1)[0].upper() for s in seen]


def test_a_send_a_claim_and_an_ack_each_look_once_before_they_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentmaild.store.rule_state.TEAM_RULES_FRESH_S", 3600.0)  # no clock here
    store = SqliteMailStore(tmp_path / "mail.db")
    store.add_agent(Agent(name="bob", capability="builder"))
    mailer = Mailer(store)
    conn = store.connection  # (lending it puts SQLite's busy wait back: before the first send)
    mailer.send(sender="lead", to="bob", subject="first", body="b")

    def send() -> None:
        mailer.send(sender="lead", to="bob", subject="second", body="b")

    # the send's one look and writes; the store's team rules were read by the first send and are
    # kept for TEAM_RULES_FRESH_S (a later send reads them again, once, before its write)
    assert _heads(conn, send) == ["BEGIN", "SELECT", "INSERT", "INSERT", "COMMIT"]
    batches: list[Batch | None] = []

    def claim() -> None:
        batches.append(store.claim("bob", max_messages=10, max_chars=10_000, lease_s=30, now=NOW))

    assert _heads(conn, claim) == ["BEGIN", "SELECT", "SELECT", "INSERT", "UPDATE", "COMMIT"]
    batch = batches[0]
    assert batch is not None and len(batch.messages) == 2
    assert batch.delivery_id in store.drained  # nothing else claimable, no queue: no claim again

    def ack() -> None:
        assert store.ack_delivery(batch.delivery_id, now=NOW + 1) == 2

    # the batch's messages, their nudges (one each), its delivery row, the agent's state
    assert _heads(conn, ack) == ["BEGIN", "UPDATE", "DELETE", "DELETE", "UPDATE", "UPDATE",
                                 "COMMIT"]  # fmt: skip
    store.close()
