"""The connector the SQL stores' seams run over, on real SQLite and real PostgreSQL: named
queries, a unique key met twice as ``Duplicate``, a failed part rolled back to its savepoint
while the transaction commits, the dialect's JSON, a failed write leaving nothing, and
PostgreSQL's NOTIFY at commit only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agentmaild.errors import StoreError
from agentmaild.models import Message
from agentmaild.store.base import MailStore
from agentmaild.store.connector import Connector, Duplicate, Tx
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.records import InsertRequest
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.pg import PgDatabases

TOKEN = {"id": "t1", "agent": "bob", "scopes": "read", "hash": "h1", "created_at": 1.0,
         "expires_at": None, "revoked_at": None}  # fmt: skip


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MailStore]:
    if request.param == "sqlite":
        store: MailStore = SqliteMailStore(tmp_path / "mail.db")
        yield store
        store.close()
        return
    databases: PgDatabases = request.getfixturevalue("pg_databases")
    dsn = databases.create()
    store = PostgresMailStore(dsn)
    yield store
    store.close()
    databases.drop(dsn)


def _db(store: MailStore) -> Connector:
    assert isinstance(store, SqliteMailStore | PostgresMailStore)
    return store.db


def test_a_unique_key_met_twice_is_a_duplicate_and_writes_nothing(sql_store: MailStore) -> None:
    db = _db(sql_store)
    db.write(lambda tx: tx.execute("token_insert", TOKEN))
    with pytest.raises(Duplicate):
        db.write(lambda tx: tx.execute("token_insert", {**TOKEN, "hash": "h2"}))
    assert [r["id"] for r in db.fetch_all("token_list")] == ["t1"]
    assert db.fetch_one("token_by_hash", {"hash": "h2"}) is None


def test_a_failed_write_leaves_nothing_behind(sql_store: MailStore) -> None:
    db = _db(sql_store)

    def half(tx: Tx) -> None:
        tx.execute("token_insert", TOKEN)
        raise StoreError("stop here")

    with pytest.raises(StoreError, match="stop here"):
        db.write(half)
    assert db.fetch_all("token_list") == []


def test_a_failed_part_rolls_back_to_its_savepoint_and_the_rest_commits(
    sql_store: MailStore,
) -> None:
    db = _db(sql_store)

    def run(tx: Tx) -> str | None:
        tx.execute("token_insert", TOKEN)
        error = tx.savepoint(lambda part: part.execute("token_insert", TOKEN))
        tx.execute("token_revoke", {"id": "t1", "now": 2.0})
        return error

    error = db.write(run)
    assert error is not None and error != ""
    [row] = db.fetch_all("token_list")
    assert (row["id"], row["revoked_at"]) == ("t1", 2.0)


def test_json_columns_go_in_and_come_back_in_the_dialect(sql_store: MailStore) -> None:
    db = _db(sql_store)
    record = {"delivery_id": "d1", "agent": "bob", "attempt": 1, "outcome": "acked",
              "error": None, "duration_s": 0.5, "at": 3.0}  # fmt: skip

    def run(tx: Tx) -> list[str]:
        tx.execute("attempt_insert", {**record, "message_ids": tx.json(["m1", "m2"])})
        params = {"agent": "bob", "message": "m2", "since": None, "limit": None}
        [row] = tx.fetch_all("attempts_list", params)
        return list(tx.from_json(row["message_ids"]))

    assert db.write(run) == ["m1", "m2"]


def test_locks_and_notify_fit_any_transaction(sql_store: MailStore) -> None:
    db = _db(sql_store)

    def run(tx: Tx) -> int:
        tx.lock("inbox:bob", "inbox:alice", "inbox:bob")
        tx.notify(["bob"])
        return tx.execute("token_insert", TOKEN)

    assert db.write(run) == 1
    assert db.dialect in {"sqlite", "postgres"}


def test_lists_reads_sent_ahead_and_row_numbers_in_the_dialect(sql_store: MailStore) -> None:
    """``array`` is one list parameter, ``prefetch`` answers what ``fetch_one`` would (in a
    pipelined write too), ``insert_row`` numbers rows only where the dialect does, and the
    one-statement send is offered only by the dialect that defines it."""
    db = _db(sql_store)
    for n in (1, 2):
        db.write(lambda tx, n=n: tx.execute("token_insert", {**TOKEN, "id": f"t{n}",
                                                             "hash": f"h{n}"}))  # fmt: skip

    def run(tx: Tx) -> tuple[object, ...]:
        later = tx.prefetch("token_by_hash", {"hash": "h2"})
        none = tx.prefetch("token_by_hash", {"hash": "nope"})
        n = tx.insert_row("counter_bump", {"name": "collapsed", "n": 1})
        found = later()
        return (found["id"] if found else None, none(), n)

    found, none, n = db.write(run, pipeline=True)
    assert (found, none) == ("t2", None)
    assert (n is None) == (db.dialect == "postgres") and (n is None or n >= 1)
    for mid in ("m1", "m2"):
        sql_store.insert(InsertRequest(messages=(Message(id=mid, from_agent="a", to_agent="bob",
                         subject="s", body="b", created_at="t"),), now=1.0))  # fmt: skip
    sql_store.ack(["m2"])
    ids = ["m1", "m2", "gone"]
    rows = db.read(lambda tx: tx.fetch_all("unread_among", {"ids": tx.array(ids)}))
    assert [r["id"] for r in rows] == ["m1"]
    assert db.offers("send_one") == (db.dialect == "postgres")
    assert db.offers("token_by_hash")


def test_postgres_notify_is_sent_at_commit_only(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as listener:
            listener.execute("LISTEN agentmaild_mail")

            def rolled_back(tx: Tx) -> None:
                tx.notify(["nobody"])
                raise StoreError("no commit")

            with pytest.raises(StoreError):
                store.db.write(rolled_back)
            store.db.write(lambda tx: tx.notify(["carol", "bob", "carol"]))
            got = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=1)]
        assert got == [("agentmaild_mail", "bob,carol")]
    finally:
        store.close()
