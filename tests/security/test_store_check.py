"""A damaged store is never served silently: `serve` runs PRAGMA quick_check and refuses, and
`agentmaild store check` says what is wrong."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.security.conftest import assert_one_line_error, run_cli
from tests.support.daemon import DaemonProc

MESSAGES = 300


@pytest.fixture
def healthy(db: Path) -> Path:
    """A store with a few hundred messages, closed (no WAL left)."""
    store = SqliteMailStore(db)
    try:
        store.add_agent(Agent(name="bob", capability="lead"))
        mailer = Mailer(store)
        for i in range(MESSAGES):
            mailer.send(sender="alice", to="bob", subject=f"s{i}", body=f"body {i} " * 20)
    finally:
        store.close()
    return db


@pytest.fixture
def corrupt(healthy: Path) -> Path:
    """The same store with junk written over its page 5 (a b-tree page)."""
    conn = sqlite3.connect(healthy)
    page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.close()
    with healthy.open("r+b") as f:
        f.seek(4 * page_size)
        f.write(bytes(range(256)) * (page_size // 256))
    return healthy


def test_serve_refuses_a_corrupt_store(corrupt: Path, tmp_path: Path) -> None:
    before = corrupt.read_bytes()
    result = run_cli(tmp_path, "serve", "--db", str(corrupt))
    assert_one_line_error(result, str(corrupt), "quick_check", "agentmaild store check",
                          ".recover")
    assert corrupt.read_bytes() == before  # refused before anything wrote to it


def test_quick_check_can_be_skipped_for_a_huge_store(
    corrupt: Path, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons({"AGENTMAILD_DAEMON_QUICK_CHECK": "false"})
    assert d.stop() == 0


def test_store_check_reports_the_damage(corrupt: Path, tmp_path: Path) -> None:
    human = run_cli(tmp_path, "--db", str(corrupt), "store", "check")
    assert human.returncode == 1
    assert "Page 5" in human.stdout and "problem:" in human.stdout
    assert "Traceback" not in human.stderr and ".recover" in human.stderr
    for full, named in (((), "Page 5"), (("--full",), "malformed")):
        result = run_cli(tmp_path, "--db", str(corrupt), "store", "check", *full, "--json")
        assert result.returncode == 1
        data = json.loads(result.stdout)
        assert data["ok"] is False and data["error"]["code"] == "store_damaged"
        assert any(named in p for p in data["problems"]), data["problems"]
    assert data["check"] == "integrity_check"


def test_store_check_passes_a_healthy_store(healthy: Path, tmp_path: Path) -> None:
    for full in ((), ("--full",)):
        result = run_cli(tmp_path, "--db", str(healthy), "store", "check", *full, "--json")
        assert result.returncode == 0, result.stdout
        data = json.loads(result.stdout)
        assert data["ok"] is True and data["problems"] == []


def test_store_check_finds_mail_stranded_by_a_missing_delivery(
    healthy: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy" / "mail.db"
    copy.parent.mkdir(mode=0o700)
    shutil.copy(healthy, copy)
    conn = sqlite3.connect(copy)
    conn.execute("UPDATE messages SET delivery_id = 'dlv-gone' WHERE subject IN ('s1', 's2')")
    conn.commit()
    conn.close()

    result = run_cli(tmp_path, "--db", str(copy), "store", "check", "--json")

    assert result.returncode == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert problem.startswith("2 unread message(s) belong to a delivery that does not exist")


def test_store_check_of_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "mail.db"
    result = run_cli(tmp_path, "--db", str(missing), "store", "check")
    assert_one_line_error(result, f"no store at {missing}")
    assert not missing.parent.exists()
