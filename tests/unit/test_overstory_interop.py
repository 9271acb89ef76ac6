"""Overstory interop: its tables upgrade losslessly, its rows read, our rows satisfy its rules."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, MessageType
from agentmaild.store.migrate import SCHEMA_VERSION
from agentmaild.store.sqlite import SqliteMailStore

# Overstory's DDL as its store creates it today (all 14 types)...
CURRENT_TYPES = ",".join(f"'{t.value}'" for t in MessageType)
CURRENT_DDL = f"""
CREATE TABLE IF NOT EXISTS messages (
  id TEXT PRIMARY KEY,
  from_agent TEXT NOT NULL,
  to_agent TEXT NOT NULL,
  subject TEXT NOT NULL,
  body TEXT NOT NULL,
  type TEXT NOT NULL DEFAULT 'status' CHECK(type IN ({CURRENT_TYPES})),
  priority TEXT NOT NULL DEFAULT 'normal' CHECK(priority IN ('low','normal','high','urgent')),
  thread_id TEXT,
  payload TEXT,
  read INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE INDEX IF NOT EXISTS idx_inbox ON messages(to_agent, read);
CREATE INDEX IF NOT EXISTS idx_thread ON messages(thread_id);
"""
# ... and an early one: no payload column, and a CHECK list without the newer types.
OLD_DDL = """
CREATE TABLE messages (
  id TEXT PRIMARY KEY,
  from_agent TEXT NOT NULL,
  to_agent TEXT NOT NULL,
  subject TEXT NOT NULL,
  body TEXT NOT NULL,
  type TEXT NOT NULL DEFAULT 'status' CHECK(type IN ('status','question','result','error')),
  priority TEXT NOT NULL DEFAULT 'normal' CHECK(priority IN ('low','normal','high','urgent')),
  thread_id TEXT,
  read INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE INDEX idx_inbox ON messages(to_agent, read);
CREATE INDEX idx_thread ON messages(thread_id);
"""

OV_ID = re.compile(r"^msg-[a-z0-9]{12}$")
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _overstory_rows(n: int, *, payload: bool) -> list[tuple[object, ...]]:
    rows = []
    for i in range(n):
        row: list[object] = [
            f"msg-{i:012d}"[:4] + f"ov{i:010d}",
            "lead",
            f"builder-{i % 3}",
            f"subject {i} ✓",
            f"body {i}\nwith lines and 'quotes'",
            ("status", "question", "result", "error")[i % 4],
            ("low", "normal", "high", "urgent")[i % 4],
            None if i % 2 else "msg-ov0000000000",
            i % 2,
            f"2026-01-0{1 + i % 9}T10:00:00.{i % 1000:03d}Z",
        ]
        if payload:
            row.insert(8, f'{{"k": {i}}}' if i % 3 == 0 else None)
        rows.append(tuple(row))
    return rows


def _make_db(path: Path, ddl: str, rows: list[tuple[object, ...]], *, payload: bool) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(ddl)
    cols = "id, from_agent, to_agent, subject, body, type, priority, thread_id, "
    cols += ("payload, " if payload else "") + "read, created_at"
    marks = ",".join("?" * len(rows[0]))
    conn.executemany(f"INSERT INTO messages ({cols}) VALUES ({marks})", rows)
    conn.commit()
    conn.close()


def _dump(path: Path, payload: bool) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    cols = "id, from_agent, to_agent, subject, body, type, priority, thread_id, "
    cols += ("payload, " if payload else "") + "read, created_at"
    rows = conn.execute(f"SELECT {cols} FROM messages ORDER BY id").fetchall()
    conn.close()
    return rows


@pytest.mark.parametrize(("ddl", "has_payload"), [(CURRENT_DDL, True), (OLD_DDL, False)])
def test_upgrade_keeps_every_row_unchanged(tmp_path: Path, ddl: str, has_payload: bool) -> None:
    db = tmp_path / "mail.db"
    rows = _overstory_rows(40, payload=has_payload)
    _make_db(db, ddl, rows, payload=has_payload)
    before = _dump(db, has_payload)

    store = SqliteMailStore(db)
    store.close()

    assert _dump(db, has_payload) == before
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    if not has_payload:
        assert (
            conn.execute("SELECT count(*) FROM messages WHERE payload IS NOT NULL").fetchone()[0]
            == 0
        )
    conn.close()


def test_upgraded_table_has_what_overstorys_migration_looks_for(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    _make_db(db, OLD_DDL, _overstory_rows(3, payload=False), payload=False)
    SqliteMailStore(db).close()
    conn = sqlite3.connect(db)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    for needle in ("CHECK", "payload", "worker_done", "worker_died", "decision_gate"):
        assert needle in sql
    indexes = {r[1]: r for r in conn.execute("PRAGMA index_list(messages)")}
    assert "idx_inbox" in indexes
    assert "idx_thread" in indexes
    assert [r[2] for r in conn.execute("PRAGMA index_info(idx_inbox)")] == ["to_agent", "read"]
    assert [r[2] for r in conn.execute("PRAGMA index_info(idx_thread)")] == ["thread_id"]
    conn.close()


def test_fresh_store_matches_overstory_columns_and_checks(tmp_path: Path) -> None:
    ours = tmp_path / "ours.db"
    SqliteMailStore(ours).close()
    theirs = tmp_path / "theirs.db"
    conn = sqlite3.connect(theirs)
    conn.executescript(CURRENT_DDL)
    conn.close()

    def info(path: Path) -> list[tuple[object, ...]]:
        c = sqlite3.connect(path)
        cols = [r[1:] for r in c.execute("PRAGMA table_info(messages)")][:11]
        c.close()
        return cols

    assert [c[0] for c in info(ours)] == [c[0] for c in info(theirs)]
    assert [c[1] for c in info(ours)] == [c[1] for c in info(theirs)]
    assert [c[2] for c in info(ours)] == [c[2] for c in info(theirs)]  # NOT NULL flags


def test_rows_overstory_wrote_are_read_and_delivered(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    conn = sqlite3.connect(db)
    conn.executescript(CURRENT_DDL)
    conn.execute(
        "INSERT INTO messages (id, from_agent, to_agent, subject, body, type, priority, "
        "thread_id, payload, read, created_at) VALUES (?,?,?,?,?,?,?,?,?,0,?)",
        (
            "msg-abc123def456",
            "lead",
            "builder-1",
            "task",
            "do it",
            "dispatch",
            "high",
            None,
            '{"taskId":"t1","specPath":"s.md","capability":"builder","fileScope":[]}',
            "2026-03-01T12:00:00.000Z",
        ),
    )
    conn.commit()
    conn.close()
    store = SqliteMailStore(db)
    m = store.get_message("msg-abc123def456")
    assert m is not None
    assert m.type == "dispatch"
    assert m.priority == "high"
    batch = store.claim("builder-1", max_messages=10, max_chars=10000, lease_s=30, now=1e9)
    assert batch is not None
    assert batch.message_ids == ("msg-abc123def456",)
    store.ack_delivery(batch.delivery_id, now=1e9)
    assert store.get_message("msg-abc123def456").read  # type: ignore[union-attr]
    store.close()


def test_rows_we_write_satisfy_overstorys_checks_and_conventions(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="builder-1", capability="builder"))
    mailer = Mailer(store)
    sent = mailer.send(
        sender="lead",
        to="builder-1",
        subject="s",
        body="b",
        type="worker_done",
        payload='{"taskId":"t","branch":"b","exitCode":0,"filesModified":["a.py"]}',
    )
    store.close()
    # Copy our rows into a table created with Overstory's exact DDL: its CHECKs accept them.
    theirs = tmp_path / "theirs.db"
    conn = sqlite3.connect(theirs)
    conn.executescript(CURRENT_DDL)
    conn.execute("ATTACH DATABASE ? AS ours", (str(db),))
    conn.execute(
        "INSERT INTO messages SELECT id, from_agent, to_agent, subject, body, type, priority, "
        "thread_id, payload, read, created_at FROM ours.messages"
    )
    row = conn.execute("SELECT id, created_at, read FROM messages").fetchone()
    conn.close()
    assert row[0] == sent.ids[0]
    assert re.match(r"^msg-[a-z0-9]+$", row[0])
    assert "/" not in row[0]
    assert ISO_Z.match(row[1])
    assert row[2] == 0
    # `ov mail check` reads unread mail by (to_agent, read = 0): the row is there for it.
    conn = sqlite3.connect(db)
    assert (
        conn.execute(
            "SELECT count(*) FROM messages WHERE to_agent = 'builder-1' AND read = 0"
        ).fetchone()[0]
        == 1
    )
    conn.close()


def test_concurrent_openers_migrate_once(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    _make_db(db, OLD_DDL, _overstory_rows(10, payload=False), payload=False)
    stores = [SqliteMailStore(db) for _ in range(3)]
    for s in stores:
        s.close()
    assert len(_dump(db, False)) == 10
