"""What only a shared PostgreSQL can get wrong: racing claims, locked rows, taken-over leases and
two processes migrating one database at once. Real server, real connections, real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator

import psycopg
import pytest

from agentmaild.errors import InboxFull, StoreError
from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Message
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_migrate import PG_SCHEMA_VERSION, current_version
from agentmaild.store.postgres_tx import connect
from agentmaild.store.records import InsertRequest
from tests.support.pg import PgDatabases
from tests.support.pg_claimer import claim_inside
from tests.support.waiting import wait_for

T0 = 1_700_000_000.0


def put(store: PostgresMailStore, n: int, to: str = "bob") -> list[str]:
    msgs = tuple(
        Message(id=new_id("msg"), from_agent="lead", to_agent=to, subject="s", body="b",
                type="status", priority="normal", created_at=iso_now(T0 + i / 1000))
        for i in range(n)
    )
    store.insert(InsertRequest(messages=msgs, now=T0))
    return [m.id for m in msgs]


@pytest.fixture
def two(pg_dsn: str) -> Iterator[tuple[PostgresMailStore, PostgresMailStore]]:
    """Two stores on one database: two connections, as two daemons would hold."""
    a, b = PostgresMailStore(pg_dsn), PostgresMailStore(pg_dsn)
    yield a, b
    a.close()
    b.close()


def test_two_processes_racing_for_one_agent_never_share_a_message(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn)
    sent = put(store, 300)
    argv = [sys.executable, "-m", "tests.support.pg_claimer", pg_dsn, "bob", "7"]
    racers = [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for p in racers:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outputs = [p.communicate(timeout=120)[0] for p in racers]
    assert [p.returncode for p in racers] == [0, 0]
    batches = [[json.loads(x) for x in out.splitlines()] for out in outputs]
    got = [i for mine in batches for b in mine for i in b["ids"]]
    assert sorted(got) == sorted(sent)  # every message claimed, none twice
    deliveries = [b["delivery"] for mine in batches for b in mine]
    assert len(set(deliveries)) == len(deliveries)
    assert all(b["attempt"] == 1 for mine in batches for b in mine)
    assert store.totals() == {"messages": 300, "unread": 0}
    store.close()


def test_a_claim_waits_for_a_racing_claim_then_sees_its_lease(
    two: tuple[PostgresMailStore, PostgresMailStore],
) -> None:
    a, b = two
    put(a, 3)
    results: list[object] = []
    with a.connection.transaction():
        first = claim_inside(a.connection, "bob", max_messages=2, max_chars=1000, lease_s=30,
                             now=T0)  # fmt: skip
        racer = threading.Thread(
            target=lambda: results.append(
                b.claim("bob", max_messages=2, max_chars=1000, lease_s=30, now=T0)
            )
        )
        racer.start()
        wait_for(lambda: _waiting_on_a_lock(a), what="the second claim to wait on the agent")
        assert results == []
    racer.join(timeout=30)
    assert first is not None and len(first.messages) == 2
    assert results == [None]  # the first claim's lease is live: nothing for a second daemon


def _waiting_on_a_lock(store: PostgresMailStore) -> bool:
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
        ).fetchone()
    return bool(row and row[0] == 1)


def test_a_claim_skips_a_row_another_transaction_has_locked(
    two: tuple[PostgresMailStore, PostgresMailStore],
) -> None:
    a, b = two
    first, second, third = put(a, 3)
    with a.connection.transaction():
        a.connection.execute("SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (first,))
        batch = b.claim("bob", max_messages=5, max_chars=1000, lease_s=30, now=T0)
    assert batch is not None and batch.message_ids == (second, third)


def test_an_expired_lease_is_taken_over_by_another_daemon_with_its_delivery_id(
    two: tuple[PostgresMailStore, PostgresMailStore],
) -> None:
    a, b = two
    put(a, 2)
    mine = a.claim("bob", max_messages=5, max_chars=1000, lease_s=30, now=T0)
    assert mine is not None
    assert b.claim("bob", max_messages=5, max_chars=1000, lease_s=30, now=T0 + 10) is None
    assert b.reap_expired(now=T0 + 31) == [(mine.delivery_id, "bob")]
    theirs = b.claim("bob", max_messages=5, max_chars=1000, lease_s=30, now=T0 + 31)
    assert theirs is not None
    assert (theirs.delivery_id, theirs.attempt) == (mine.delivery_id, 2)
    assert theirs.message_ids == mine.message_ids
    assert a.ack_delivery(mine.delivery_id, now=T0 + 32) == 2  # the late ack still counts once
    assert b.ack_delivery(theirs.delivery_id, now=T0 + 33) == 0


def test_two_processes_migrating_one_database_at_once_both_succeed(
    pg_databases: PgDatabases,
) -> None:
    dsn = pg_databases.create(migrated=False)
    code = (
        "import sys; from agentmaild.store.postgres import PostgresMailStore; "
        "sys.stdin.readline(); PostgresMailStore(sys.argv[1]).close()"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, dsn], stdin=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    with connect(dsn) as conn:
        assert current_version(conn) == PG_SCHEMA_VERSION
        assert conn.execute("SELECT count(*) AS n FROM am_schema_version").fetchone() == {"n": 1}
    store = PostgresMailStore(dsn)
    assert store.totals() == {"messages": 0, "unread": 0}
    store.close()
    pg_databases.drop(dsn)


def test_a_read_only_open_of_an_empty_database_says_there_is_no_store(
    pg_databases: PgDatabases,
) -> None:
    dsn = pg_databases.create(migrated=False)
    with pytest.raises(StoreError, match="no agentmaild store"):
        PostgresMailStore(dsn, readonly=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass('messages') IS NULL").fetchone()
        assert row == (True,)  # nothing was created
    pg_databases.drop(dsn)


def test_a_send_notifies_its_recipients_once_at_commit(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn)
    with psycopg.connect(pg_dsn, autocommit=True) as listener:
        listener.execute("LISTEN agentmaild_mail")
        listener.execute("LISTEN agentmaild_registry")
        put(store, 3, to="bob")
        put(store, 1, to="carol")
        store.add_agent(Agent(name="dave", capability="builder"))
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=3)]
    assert got == [("agentmaild_mail", "bob"), ("agentmaild_mail", "carol"),
                   ("agentmaild_registry", "")]
    store.close()


def test_a_refused_send_notifies_nobody(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn)
    put(store, 1)
    with psycopg.connect(pg_dsn, autocommit=True) as listener:
        listener.execute("LISTEN agentmaild_mail")
        msg = Message(id=new_id("msg"), from_agent="lead", to_agent="bob", subject="s",
                      body="b", type="status", priority="normal", created_at=iso_now(T0))
        with pytest.raises(InboxFull):
            store.insert(InsertRequest(messages=(msg,), now=T0, unread_max=1))
        put(store, 1, to="carol")  # the first notification to arrive is this one
        got = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert got == ["carol"]
    store.close()
