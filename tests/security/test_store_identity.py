"""One store, one daemon, whatever the store is called: symlinks, hard links, planted lock files,
shared directories, and start-up failures that stay one line."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.security.conftest import assert_one_line_error, run_cli
from tests.support.daemon import DaemonProc
from tests.support.waiting import read_jsonl, wait_for

AGENTS = Path(__file__).resolve().parent.parent / "agents"


def _store_with_a_turn_in_flight(db: Path, tmp: Path) -> tuple[Path, Path]:
    """bob (lead) and victim (spawn, parent bob) whose turn lasts until the gate file exists."""
    record, gate = tmp / "turns.jsonl", tmp / "gate"
    store = SqliteMailStore(db)
    try:
        store.add_agent(Agent(name="bob", capability="lead"))
        command = (sys.executable, "-S", str(AGENTS / "gated_agent.py"), str(record), str(gate))
        store.add_agent(Agent(name="victim", capability="builder", channel="spawn",
                              command=command, parent="bob"))
    finally:
        store.close()
    return record, gate


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("own_socket", [False, True], ids=["same-socket", "own-socket"])
def test_serve_through_a_symlink_is_refused_before_touching_the_store(
    db: Path, tmp_path: Path, daemons: Callable[..., DaemonProc], own_socket: bool
) -> None:
    record, gate = _store_with_a_turn_in_flight(db, tmp_path)
    first = daemons()
    first.cli("send", "--from", "bob", "--to", "victim", "--subject", "work", "--body", "x")
    wait_for(lambda: read_jsonl(record), 15, "the first turn to start")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    link = elsewhere / "link.db"
    link.symlink_to(db)
    env = {"AGENTMAILD_DAEMON_SOCKET": str(elsewhere / "own.sock")} if own_socket else None

    second = run_cli(tmp_path, "serve", "--db", str(link), env=env)

    assert first.proc is not None
    assert_one_line_error(second, "already running for", f"pid {first.proc.pid}")
    # Nothing was recovered: the batch in flight is still attempt 1, nobody got a false report.
    assert _rows(db, "SELECT state, attempts FROM am_deliveries") == [("claimed", 1)]
    assert _rows(db, "SELECT count(*) FROM messages WHERE from_agent = 'agentmaild'") == [(0,)]
    assert first.ready()
    gate.touch()
    wait_for(lambda: _rows(db, "SELECT state FROM am_deliveries") == [("acked",)], 15, "the ack")
    assert [r["phase"] for r in read_jsonl(record)] == ["started", "done"]  # one attempt only


def test_a_hard_linked_store_is_refused_by_every_command(db: Path, tmp_path: Path) -> None:
    SqliteMailStore(db).close()
    other_dir = tmp_path / "other"
    other_dir.mkdir(mode=0o700)
    other = other_dir / "mail.db"
    os.link(db, other)

    add = run_cli(tmp_path, "--db", str(other), "agents", "add", "bob", "--capability", "lead")
    assert_one_line_error(add, "2 hard links", str(other))
    as_json = run_cli(tmp_path, "--db", str(other), "--json", "agents", "list")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["code"] == "store"
    check = run_cli(tmp_path, "check", "--inject", "--agent", "bob", "--db", str(other))
    assert_one_line_error(check, "2 hard links")
    for path in (other, db):  # both names: neither is "the" store while two exist
        assert_one_line_error(run_cli(tmp_path, "serve", "--db", str(path)), "2 hard links")
    assert not other_dir.joinpath("mail.db-wal").exists()  # nothing ever opened the second name

    other.unlink()
    ok = run_cli(tmp_path, "--db", str(db), "agents", "add", "bob", "--capability", "lead")
    assert ok.returncode == 0, ok.stderr


def test_a_symlink_planted_at_the_lock_is_never_followed(db: Path, tmp_path: Path) -> None:
    SqliteMailStore(db).close()
    victim = tmp_path / "precious.txt"
    victim.write_text("precious\n")
    db.with_name("mail.db.lock").symlink_to(victim)

    result = run_cli(tmp_path, "serve", "--db", str(db))

    assert_one_line_error(result, "symbolic link", "mail.db.lock")
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_serve_refuses_a_store_directory_others_can_write(
    db: Path, tmp_path: Path, mode: int
) -> None:
    SqliteMailStore(db).close()
    db.parent.chmod(mode)

    result = run_cli(tmp_path, "serve", "--db", str(db))

    assert_one_line_error(result, str(db.parent), f"chmod 700 {db.parent}")
    assert not db.with_name("mail.db.lock").exists()  # refused before taking anything


def test_serve_accepts_a_sticky_store_directory_of_its_own(
    db: Path, daemons: Callable[..., DaemonProc]
) -> None:
    SqliteMailStore(db).close()
    db.parent.chmod(0o1777)
    d = daemons()
    assert d.stop() == 0


def test_serve_creates_the_store_directory_private(
    tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    db = tmp_path / "fresh" / "store" / "mail.db"
    d = daemons(path=db)
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    assert d.stop() == 0


def test_a_start_up_failure_is_one_line_not_a_traceback(db: Path, tmp_path: Path) -> None:
    SqliteMailStore(db).close()
    not_a_socket = tmp_path / "not-a-socket"
    not_a_socket.write_text("")

    result = run_cli(tmp_path, "serve", "--db", str(db),
                     env={"AGENTMAILD_DAEMON_SOCKET": str(not_a_socket)})

    assert_one_line_error(result, "is not a socket")
