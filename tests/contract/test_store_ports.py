"""The store's cold-path port (``store.ports``) and the dashboard's reader (``store.reader``), held
to one contract on SQLite and PostgreSQL: what a hook, ``check --inject`` and the tmux channel
ask of a store, and what the dashboard reads, behave the same whichever backend holds the mail.

The memory store has neither: the cold paths open a real store of their own."""

from __future__ import annotations

import select
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentmaild.errors import StoreError
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.base import MailStore
from agentmaild.store.kinds import open_port, open_reader, port_of
from agentmaild.store.location import StoreLocation
from agentmaild.store.ports import Port
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.pg import PgDatabases

Setup = tuple[MailStore, StoreLocation]


@pytest.fixture(params=["sqlite", "postgres"])
def placed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    """A store holding agent bob (tmux) and where it is, on each backend in turn."""
    store: MailStore
    if request.param == "postgres":
        databases: PgDatabases = request.getfixturevalue("pg_databases")
        dsn = databases.create()
        store, target = PostgresMailStore(dsn), dsn
    else:
        store, target = SqliteMailStore(tmp_path / "mail.db"), str(tmp_path / "mail.db")
    store.add_agent(Agent(name="bob", capability="builder", channel="tmux", tmux_target="w:0"))
    yield store, StoreLocation.of(target)
    store.close()
    if request.param == "postgres":
        databases.drop(target)


@pytest.fixture
def port(placed: Setup) -> Iterator[Port]:
    opened = open_port(placed[1])
    assert opened is not None
    yield opened
    opened.close()


def send(store: MailStore, subject: str, body: str = "b", priority: str = "normal") -> str:
    sent = Mailer(store).send(sender="lead", to="bob", subject=subject, body=body,
                              priority=priority)  # fmt: skip
    return sent.messages[0].id


def first_only(rows: list[dict[str, Any]], unread: int, nudges: list[dict[str, Any]],
               lead: str) -> tuple[str, list[str]]:  # fmt: skip
    """A render that fits one message: (its text, its id), with what it was told."""
    return f"{rows[0]['subject']} of {unread}/{len(rows)}", [rows[0]["id"]]


def test_inject_takes_within_the_budget_in_priority_order_and_acks_what_was_rendered(
    placed: Setup, port: Port
) -> None:
    store, _ = placed
    low = send(store, "low", "x" * 3000, priority="low")
    urgent = send(store, "urgent", "y" * 3000, priority="urgent")
    normal = send(store, "normal", "z" * 3000)
    # 2,500 of the 10,000 are kept for headers: two 3,000-character rows fit, not three.
    text, ids = port.inject("bob", 10_000, first_only)
    assert (text, ids) == ("urgent of 3/2", [urgent])
    assert store.get_message(urgent).read  # type: ignore[union-attr]
    assert not any(store.get_message(m).read for m in (normal, low))  # type: ignore[union-attr]
    assert port.inject("bob", 10_000, first_only)[1] == [normal]
    assert port.inject("bob", 10_000, first_only)[1] == [low]
    assert port.inject("bob", 10_000, first_only) == ("", [])


def test_a_take_leaves_the_mail_the_daemon_has_in_flight(placed: Setup, port: Port) -> None:
    store, _ = placed
    flying = send(store, "flying")
    assert store.claim("bob", max_messages=10, max_chars=10_000, lease_s=60, now=time.time())
    later = send(store, "later")
    taken = port.write(lambda: port.take("bob", 10_000))
    assert taken is not None
    rows, unread, _, lead = taken
    assert [r["id"] for r in rows] == [later] and unread == 2 and lead == ""
    assert flying != later


def test_the_hook_port_records_turn_state_seen_headers_and_reads_them_back(
    placed: Setup, port: Port
) -> None:
    assert port.turn("bob") == (None, None) and port.turn("nobody") == (None, None)
    port.write(lambda: port.set_state("bob", "busy", "sess-1"))
    state, at = port.turn("bob")
    assert state == "busy" and at is not None
    port.write(lambda: port.set_state("bob", "idle", "", only_from="waiting"))
    assert port.turn("bob")[0] == "busy"  # only from "waiting": left alone
    assert placed[0].get_agent("bob").session_id == "sess-1"  # type: ignore[union-attr]
    assert not port.delivery_seen("dlv-aaaaaaaaaaaa")
    for _ in range(2):  # a header seen twice is recorded once
        port.write(lambda: port.record_seen("bob", "sess-1", ["dlv-aaaaaaaaaaaa"], 3600.0))
    assert port.delivery_seen("dlv-aaaaaaaaaaaa")
    port.write(lambda: port.record_seen("bob", None, ["dlv-bbbbbbbbbbbb"], -1.0))
    assert not port.delivery_seen("dlv-aaaaaaaaaaaa")  # older than keep_s: pruned


def test_known_and_unread(placed: Setup, port: Port) -> None:
    store, _ = placed
    assert port.knows("bob") and not port.knows("stranger")
    assert not port.has_unread("bob")
    Mailer(store).send(sender="lead", to="bob", subject="s", body="b")
    assert port.has_unread("bob")


def test_a_failed_write_rolls_back_and_leaves_as_is(placed: Setup, port: Port) -> None:
    def work() -> None:
        port.set_state("bob", "busy", "")
        raise KeyError("boom")

    with pytest.raises(KeyError):
        port.write(work)
    assert port.turn("bob") == (None, None)
    port.write(lambda: port.set_state("bob", "idle", ""))  # the port is usable after
    assert port.turn("bob")[0] == "idle"


def test_a_lent_port_works_on_the_open_stores_own_connection(placed: Setup) -> None:
    store, location = placed
    mid = send(store, "lent")
    with port_of(store) as port:
        assert port.local == location.local
        text, ids = port.inject("bob", 10_000, first_only)
    assert ids == [mid] and text == "lent of 1/1"
    assert store.get_message(mid).read  # type: ignore[union-attr]


def test_a_wake_reaches_the_daemon_at_commit(placed: Setup, tmp_path: Path) -> None:
    _, location = placed
    woken: list[tuple[str, str]] = []
    port = open_port(location, lambda local, agent: woken.append((local, agent)))
    assert port is not None
    listener = None
    if not location.is_file:  # PostgreSQL: a NOTIFY naming the agent, to LISTENing daemons
        listener = psycopg.connect(location.target, autocommit=True)
        listener.execute("LISTEN agentmaild_mail")
    try:
        port.write(lambda: port.set_state("bob", "idle", ""), wake="bob")
        if listener is None:
            assert woken == [(location.local, "bob")]
        else:
            assert woken == []
            assert select.select([listener.fileno()], [], [], 10)[0], "no NOTIFY within 10 s"
            assert [n.payload for n in listener.notifies(timeout=1, stop_after=1)] == ["bob"]
    finally:
        port.close()
        if listener is not None:
            listener.close()


def test_no_store_means_no_port_and_a_broken_one_a_store_error(tmp_path: Path) -> None:
    assert open_port(StoreLocation.of(tmp_path / "none.db")) is None
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError, match="is a directory"):
        open_port(StoreLocation.of(tmp_path / "dir.db"))
    dsn = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    with pytest.raises(StoreError, match="cannot reach store"):
        open_port(StoreLocation.of(dsn))


def test_the_dashboard_reader_reads_the_same_on_both_stores(placed: Setup) -> None:
    store, _ = placed
    reader = open_reader(store)
    try:
        before = reader.mark()
        mid = send(store, "zeppelin sighted", "over the canary islands")
        send(store, "unrelated")
        assert reader.mark() != before
        [bob] = reader.team()
        assert (bob["name"], bob["unread"], bob["claimed"]) == ("bob", 2, [])
        threads = reader.threads()
        assert {t["thread"] for t in threads} >= {mid} and len(threads) == 2
        [hit] = reader.search("zeppelin")
        assert hit["id"] == mid and hit["thread"] == mid
        assert [m["id"] for m in reader.thread(mid)] == [mid]
        assert reader.dead() == [] and reader.timeline("bob")["attempts"] == []
    finally:
        reader.close()
