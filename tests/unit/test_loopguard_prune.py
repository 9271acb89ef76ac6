"""The loop guard's memory of recent sends on SQLite: one insert per send, a prune per 64 rows,
and schema 6 (no index on ``am_recent_sends(at)``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmaild.ids import iso_now, new_id
from agentmaild.models import Message
from agentmaild.store.guard import PRUNE_EVERY
from agentmaild.store.migrate import SCHEMA_VERSION
from agentmaild.store.records import InsertRequest, InsertResult
from agentmaild.store.sqlite import SqliteMailStore

WINDOW_S = 10.0


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "mail.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteMailStore]:
    s = SqliteMailStore(db)
    yield s
    s.close()


def send(store: SqliteMailStore, digest: str, now: float) -> InsertResult:
    m = Message(id=new_id("msg"), from_agent="bob", to_agent="operator", subject=digest,
                body="x", created_at=iso_now(now))
    return store.insert(InsertRequest(messages=(m,), now=now, collapse=(digest, WINDOW_S)))


def remembered(db: Path) -> list[tuple[str, float]]:
    with sqlite3.connect(db) as conn:
        return [(str(r[0]), float(r[1])) for r in
                conn.execute("SELECT digest, at FROM am_recent_sends ORDER BY rowid")]


def test_expired_sends_are_kept_until_every_64th_send_prunes_them(
    store: SqliteMailStore, db: Path
) -> None:
    assert PRUNE_EVERY == 64
    for i in range(62):
        send(store, f"old-{i}", 1000.0)
    send(store, "kept", 1995.0)  # row 63: inside the window of the next send
    assert len(remembered(db)) == 63  # no send before the 64th deleted anything
    send(store, "new", 2000.0)  # row 64: prunes what left the window
    assert remembered(db) == [("kept", 1995.0), ("new", 2000.0)]
    assert send(store, "kept", 2001.0).duplicate  # still collapses
    assert not send(store, "old-0", 2001.0).duplicate  # expired: a new send


def test_the_prune_never_drops_a_send_inside_the_window_even_out_of_order(
    store: SqliteMailStore, db: Path
) -> None:
    send(store, "early", 1000.0)
    send(store, "inside", 1995.0)
    for i in range(61):  # stamped before "inside" (senders' clocks race): expired yet after it
        send(store, f"late-{i}", 1000.0)
    send(store, "trigger", 2000.0)  # row 64
    digests = [d for d, _ in remembered(db)]
    assert "early" not in digests
    assert digests[:2] == ["inside", "late-0"]  # the prefix before "inside" went, no more
    assert send(store, "inside", 2001.0).duplicate
    assert not send(store, "late-0", 2001.0).duplicate  # expired rows never collapse anything


def test_schema_6_drops_the_index_on_at_and_keeps_the_rows(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    s = SqliteMailStore(db)
    send(s, "kept", 1000.0)
    s.close()
    with sqlite3.connect(db) as conn:  # as a schema-5 file was
        conn.execute("CREATE INDEX am_idx_recent_sends_at ON am_recent_sends(at)")
        conn.execute("PRAGMA user_version = 5")
    s = SqliteMailStore(db)
    s.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "am_idx_recent_sends_at" not in names
    assert remembered(db) == [("kept", 1000.0)]
