"""What a send writes on SQLite (issue 15): small pages for a new store, and schema 7's delivery
index that new mail never enters; an older file is upgraded with every row and delivery kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Batch
from agentmaild.store.migrate import SCHEMA_VERSION
from agentmaild.store.sqlite import NEW_STORE_PAGE_SIZE, SqliteMailStore


def _store(db: Path, mail: int = 0) -> SqliteMailStore:
    """A store with bob registered and ``mail`` messages sent to him."""
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="builder", channel="spawn", command=("true",)))
    mailer = Mailer(store)
    for i in range(mail):
        mailer.send(sender="alice", to="bob", subject=f"s{i}", body="b")
    return store


def _claim_two(store: SqliteMailStore) -> Batch:
    batch = store.claim("bob", max_messages=2, max_chars=10_000, lease_s=60, now=1000.0)
    assert batch is not None and len(batch.messages) == 2
    return batch


def _index_sql(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'am_idx_delivery'"
        ).fetchone()
    return str(row[0])


def _entries(db: Path) -> int:
    """Rows of am_idx_delivery, counted through the index itself."""
    with sqlite3.connect(db) as conn:
        plan = " ".join(
            r[3]
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT count(*) FROM messages INDEXED BY am_idx_delivery "
                "WHERE delivery_id IS NOT NULL"
            )
        )
        assert "am_idx_delivery" in plan
        return int(
            conn.execute(
                "SELECT count(*) FROM messages INDEXED BY am_idx_delivery "
                "WHERE delivery_id IS NOT NULL"
            ).fetchone()[0]
        )


def test_a_new_store_has_small_pages_and_an_existing_file_keeps_its_own(tmp_path: Path) -> None:
    new = tmp_path / "new.db"
    _store(new).close()
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as conn:  # a file someone else created (Overstory: 4 KiB pages)
        conn.execute("CREATE TABLE t (x)")
    SqliteMailStore(old).close()
    with sqlite3.connect(new) as a, sqlite3.connect(old) as b:
        assert a.execute("PRAGMA page_size").fetchone()[0] == NEW_STORE_PAGE_SIZE == 1024
        assert b.execute("PRAGMA page_size").fetchone()[0] == 4096
        assert a.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_new_mail_is_not_in_the_delivery_index_and_claimed_mail_is(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    store = _store(db, mail=3)
    assert "WHERE delivery_id IS NOT NULL" in _index_sql(db)
    assert _entries(db) == 0
    batch = _claim_two(store)
    assert _entries(db) == 2
    assert store.ack_delivery(batch.delivery_id, now=1001.0) == 2
    store.close()


def test_schema_7_upgrade_swaps_the_delivery_index_and_keeps_every_row(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    store = _store(db, mail=4)
    batch = _claim_two(store)
    store.close()
    with sqlite3.connect(db) as conn:  # as a schema-6 file was: the index on every message
        conn.execute("DROP INDEX am_idx_delivery")
        conn.execute("CREATE INDEX am_idx_delivery ON messages(delivery_id)")
        conn.execute("PRAGMA user_version = 6")
    store = SqliteMailStore(db)
    try:
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 11
        assert "WHERE delivery_id IS NOT NULL" in _index_sql(db)
        assert _entries(db) == 2
        # The claimed batch is still the agent's, under its delivery id; the rest is still new.
        assert store.ack_delivery(batch.delivery_id, now=1001.0) == 2
        again = store.claim("bob", max_messages=10, max_chars=10_000, lease_s=60, now=1002.0)
        assert again is not None and len(again.messages) == 2
        assert len(store.inbox("bob")) == 4
    finally:
        store.close()
