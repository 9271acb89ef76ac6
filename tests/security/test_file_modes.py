"""Mail is readable by its owner only: the store, its WAL and shared-memory files are 0600 whatever
the umask, and `status` warns about an older store that others can read."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path

from tests.security.conftest import run_cli
from tests.support.daemon import DaemonProc
from tests.support.waiting import wait_for

SIDE = ("mail.db", "mail.db-wal", "mail.db-shm")


def _modes(db: Path) -> dict[str, int]:
    return {name: stat.S_IMODE(db.with_name(name).stat().st_mode) for name in SIDE}


def test_a_store_created_by_a_command_is_private(db: Path, tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--db", str(db), "agents", "add", "bob", "--capability", "lead")
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


def test_a_store_created_by_the_daemon_is_private_with_its_wal_and_shm(
    db: Path, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons()  # serve creates the store; WAL and -shm exist while it runs
    wait_for(lambda: all(db.with_name(n).exists() for n in SIDE), 20, "the WAL and -shm files")
    assert _modes(db) == dict.fromkeys(SIDE, 0o600)
    assert d.cli("agents", "add", "bob", "--capability", "lead").returncode == 0
    assert _modes(db) == dict.fromkeys(SIDE, 0o600)
    assert d.stop() == 0


def test_status_warns_about_a_store_others_can_read(db: Path, tmp_path: Path) -> None:
    assert run_cli(tmp_path, "--db", str(db), "agents", "add", "bob", "--capability",
                   "lead").returncode == 0
    db.chmod(0o644)  # as an older agentmaild (or a plain sqlite3) left it

    human = run_cli(tmp_path, "--db", str(db), "status")
    as_json = run_cli(tmp_path, "--db", str(db), "status", "--json")

    assert human.returncode == 0, human.stderr
    [warning] = human.stderr.splitlines()
    assert warning.startswith("warning: ") and f"chmod 600 {db}" in warning
    assert "daemon: not running" in human.stdout
    data = json.loads(as_json.stdout)
    assert data["ok"] is True
    assert len(data["warnings"]) == 1 and f"chmod 600 {db}" in data["warnings"][0]

    for path in db.parent.glob(db.name + "*"):  # what the warning's fix says to do
        path.chmod(0o600)
    quiet = run_cli(tmp_path, "--db", str(db), "status", "--json")
    assert json.loads(quiet.stdout)["warnings"] == [] and quiet.stderr == ""
