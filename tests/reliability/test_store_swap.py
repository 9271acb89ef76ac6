"""The store file replaced or deleted under a running daemon: it notices within a tick, exits
non-zero, and never lets its WAL reach the file that now has the store's name."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import DaemonProc, assert_sound

EXIT_WITHIN_S = 20.0  # a hang bound: the daemon looks once a second


def _subjects(db: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT subject FROM messages ORDER BY subject")]
    finally:
        conn.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _store_with_backup(db: Path) -> Path:
    """bob and three messages, and a consistent copy of that state beside the store."""
    store = SqliteMailStore(db)
    try:
        store.add_agent(Agent(name="bob", capability="lead"))
    finally:
        store.close()
    return db.with_name("backup.db")


def _send(d: DaemonProc, *subjects: str) -> None:
    for subject in subjects:
        result = d.cli("send", "--to", "bob", "--subject", subject, "--body", "x")
        assert result.returncode == 0, result.stderr


def _backup(db: Path, to: Path) -> None:
    src, dst = sqlite3.connect(db), sqlite3.connect(to)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def test_a_store_replaced_under_the_daemon_stops_it_and_stays_intact(
    db: Path, daemons: Callable[..., DaemonProc]
) -> None:
    backup = _store_with_backup(db)
    d = daemons()
    _send(d, "old-1", "old-2", "old-3")
    _backup(db, backup)
    _send(d, *(f"new-{i:02d}" for i in range(20)))  # frames in the daemon's WAL
    assert db.with_name("mail.db-wal").stat().st_size > 0
    restored = _digest(backup)

    backup.rename(db)  # `mv backup.db mail.db` with the daemon running

    assert d.proc is not None
    assert d.proc.wait(EXIT_WITHIN_S) != 0
    [event] = d.events("daemon.store_replaced")
    assert event["level"] == "critical"
    assert _digest(db) == restored  # the old WAL never reached the restored file
    assert _subjects(db) == ["old-1", "old-2", "old-3"]
    # A later command opens the restored file with whatever WAL is left beside it.
    assert d.cli("inbox", "--agent", "bob").returncode == 0
    assert _subjects(db) == ["old-1", "old-2", "old-3"]
    assert_sound(db)


def test_a_store_deleted_under_the_daemon_stops_it(
    db: Path, daemons: Callable[..., DaemonProc]
) -> None:
    _store_with_backup(db)
    d = daemons()
    _send(d, "doomed")

    db.unlink()

    assert d.proc is not None
    assert d.proc.wait(EXIT_WITHIN_S) != 0
    [event] = d.events("daemon.store_deleted")
    assert event["level"] == "critical"
    assert not db.exists()  # nothing was written back under the store's name
