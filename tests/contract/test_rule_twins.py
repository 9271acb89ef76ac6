"""The rules that also run inside SQL agree with their Python definitions (``store.checks``).

For speed and atomicity a one-message send decides some rules in SQL: SQLite's ``send_probe``
reads (the earlier send it collapses into, the recipient's state, a full inbox) and the general
send's ``unread_count_reaches`` / ``recent_send_get``; PostgreSQL's ``am_send_one`` decides the
whole send (it writes only when every check passes, else answers 'slow'). Every combination of
recipient (unknown, registered in each state, removed), ``refuse_unknown``, unread count
against the cap and repeat-collapse window (none, inside, on its edge, outside) is set up through
the store's API and asked of SQL and of ``checks``; both must give the same answer.
"""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from agentmaild.errors import InboxFull, RecipientRefused
from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Message
from agentmaild.store import checks
from agentmaild.store.base import MailStore
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_tx import PQ, one
from agentmaild.store.queries import Q
from agentmaild.store.records import InsertRequest
from agentmaild.store.send import send_one_params
from agentmaild.store.sqlite import SqliteMailStore

NOW = 1_700_000_000.0
WINDOW_S = 60.0
RECIPIENTS = ("unknown", "booting", "working", "idle", "completed", "zombie", "removed")
CAPS = ((0, 0), (3, 0), (0, 2), (1, 2), (2, 2), (3, 2))  # (unread, cap); cap 0: no cap
# When the earlier send with the digest was made (None: no digest given).
EARLIER = {
    "none": None,
    "inside": NOW - WINDOW_S + 0.5,
    "edge": NOW - WINDOW_S,  # the window is (now - window, now]: just out
    "outside": NOW - WINDOW_S - 5,
}


class Case(NamedTuple):
    name: str  # the recipient, one per case so cases do not share an inbox
    recipient: str
    refuse_unknown: bool
    unread: int
    cap: int
    earlier: str

    @property
    def digest(self) -> str | None:
        return None if self.earlier == "none" else f"digest-{self.name}"

    @property
    def state(self) -> str | None:
        return None if self.recipient in ("unknown", "removed") else self.recipient

    def request(self) -> InsertRequest:
        return InsertRequest(
            messages=(msg(self.name),),
            now=NOW,
            check_recipients=(self.name,),
            refuse_unknown=self.refuse_unknown,
            unread_max=self.cap,
            collapse=None if self.digest is None else (self.digest, WINDOW_S),
        )


def cases() -> list[Case]:
    combos = itertools.product(RECIPIENTS, (True, False), CAPS, EARLIER)
    return [Case(f"r{i}", r, refuse, *cap, e) for i, (r, refuse, cap, e) in enumerate(combos)]


def msg(to: str, at: float = NOW) -> Message:
    return Message(id=new_id("msg"), from_agent="lead", to_agent=to, subject="s", body="b",
                   created_at=iso_now(at))  # fmt: skip


def set_up(store: MailStore, case: Case) -> None:
    """The case's rows, written through the store's API."""
    if case.recipient != "unknown":
        store.add_agent(Agent(name=case.name, capability="builder"))
    if case.recipient == "removed":
        store.remove_agent(case.name)
    elif case.state not in (None, "booting"):
        store.set_agent_state(case.name, str(case.state), force=True)
    for _ in range(case.unread):
        store.insert(InsertRequest(messages=(msg(case.name),), now=NOW - 1))
    at = EARLIER[case.earlier]
    if at is not None and case.digest is not None:  # an earlier send to someone else
        store.insert(InsertRequest(messages=(msg("lead", at),), now=at,
                                   collapse=(case.digest, WINDOW_S)))  # fmt: skip


class Python(NamedTuple):
    """What ``checks`` decides for a case."""

    collapses: bool
    refusal: str | None
    full: bool

    @property
    def writes(self) -> bool:
        return not self.collapses and self.refusal is None and not self.full


def decide(case: Case) -> Python:
    refusal = checks.recipient_refusal(case.name, case.state, case.refuse_unknown)
    return Python(
        collapses=checks.collapses(EARLIER[case.earlier], NOW, WINDOW_S),
        refusal=None if refusal is None else refusal.message,
        full=checks.unread_cap_reached(case.unread, case.cap),
    )


def test_the_cases_cover_every_outcome() -> None:
    decided = [decide(c) for c in cases()]
    assert {d.collapses for d in decided} == {True, False}
    assert {d.full for d in decided} == {True, False}
    assert {d.writes for d in decided} == {True, False}
    assert {d.refusal is None for d in decided} == {True, False}


def sqlite_answers(conn: sqlite3.Connection, case: Case) -> Python:
    """SQLite's answers: ``send_probe`` (the one-message send), checked against the general
    send's ``unread_count_reaches`` and ``recent_send_get``; the refusal of the state it read."""
    since = checks.window_start(NOW, WINDOW_S)
    cap_to = case.name if case.cap > 0 else None
    earlier, state, full = conn.execute(Q["send_probe"], {
        "digest": case.digest, "since": since, "to": case.name, "cap_to": cap_to, "cap": case.cap,
    }).fetchone()  # fmt: skip
    general_full = case.cap > 0 and conn.execute(
        Q["unread_count_reaches"], {"to": case.name, "cap": case.cap}
    ).fetchone() is not None
    general_earlier = conn.execute(Q["recent_send_get"], (case.digest, since)).fetchone()
    assert (full is not None) == general_full, case
    assert (earlier is None) == (general_earlier is None), case
    refused = checks.recipient_refusal(case.name, state, case.refuse_unknown)
    refusal = None if refused is None else refused.message
    return Python(collapses=earlier is not None, refusal=refusal, full=full is not None)


def test_sqlite_send_probe_agrees_with_checks(tmp_path: Path) -> None:
    store = SqliteMailStore(tmp_path / "mail.db")
    conn = sqlite3.connect(tmp_path / "mail.db")
    try:
        for case in cases():
            set_up(store, case)
            assert sqlite_answers(conn, case) == decide(case), case
    finally:
        conn.close()
        store.close()


def pg_general(store: PostgresMailStore, case: Case) -> tuple[bool, bool]:
    """The general send's reads on PostgreSQL: (collapses, full)."""
    since = checks.window_start(NOW, WINDOW_S)
    earlier = one(store.connection, PQ["recent_send_get"], {"digest": case.digest, "since": since})
    full = case.cap > 0 and one(
        store.connection, PQ["unread_count_reaches"], {"to": case.name, "cap": case.cap}
    ) is not None
    return earlier is not None, full


def unread_of(store: MailStore, name: str) -> int:
    return len(store.inbox(name, unread_only=True))


def test_postgres_am_send_one_agrees_with_checks(pg_dsn: str) -> None:
    """``am_send_one`` writes exactly when ``checks`` lets the send through; when it does not,
    it writes nothing (and the store's general send, whose errors ``test_store_checks`` holds
    to the same texts on every store, answers)."""
    store = PostgresMailStore(pg_dsn)
    try:
        for case in cases():
            set_up(store, case)
            python = decide(case)
            assert pg_general(store, case) == (python.collapses, python.full), case
            params = send_one_params(case.request())
            assert params is not None, "the case must take the one-statement path"
            before = unread_of(store, case.name)
            row = store.db.single("send_one", params)
            sent = row is not None and row["outcome"] == "sent"
            assert sent == python.writes, case
            assert unread_of(store, case.name) == before + int(sent), case
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_store_gives_checks_answer_for_each_case(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Through ``insert`` (either path, as the store picks): collapsed, refused with the text
    ``checks`` words, full, or written — as ``decide`` says."""
    if kind == "postgres":
        store: MailStore = PostgresMailStore(request.getfixturevalue("pg_dsn"))
    else:
        store = SqliteMailStore(tmp_path / "mail.db")
    try:
        for case in cases()[::3]:  # a third of the cases: every outcome, a shorter test
            set_up(store, case)
            assert outcome(store, case) == expected(decide(case)), case
    finally:
        store.close()


def outcome(store: MailStore, case: Case) -> Any:
    try:
        result = store.insert(case.request())
    except RecipientRefused as exc:
        return ("refused", exc.message)
    except InboxFull:
        return "full"
    return "collapsed" if result.collapsed else "written"


def expected(python: Python) -> Any:
    if python.collapses:
        return "collapsed"
    if python.refusal is not None:
        return ("refused", python.refusal)
    return "full" if python.full else "written"
