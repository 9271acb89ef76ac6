"""Log files are never written through a planted link: agent logs, their rotation, the hook log.

Whoever can write the store directory (an agent runs there) may put a symlink, a hard link, a FIFO
or someone else's file where a log goes; the daemon and the hook must refuse it, not follow it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agentmaild.hooks.state import log_line
from agentmaild.models import Agent
from agentmaild.procs.logfiles import RotatingLog, log_path
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc, base_env, daemon_factory
from tests.support.waiting import read_jsonl, wait_for

AGENTS = Path(__file__).resolve().parent.parent / "agents"
NOBODY = 65534
PRECIOUS = b"export PATH=/usr/bin\n"


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A file of ours outside the logs directory that a planted link points at."""
    path = tmp_path / "elsewhere" / "bashrc"
    path.parent.mkdir()
    path.write_bytes(PRECIOUS)
    return path


# --- the daemon's agent log ----------------------------------------------------------------------


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    with daemon_factory(tmp_path / "store" / "mail.db", tmp_path, defaults={}, text=True) as make:
        yield make


def test_the_daemon_never_writes_agent_output_through_a_planted_symlink(
    tmp_path: Path, daemons: Callable[..., DaemonProc], target: Path
) -> None:
    db = tmp_path / "store" / "mail.db"
    db.parent.mkdir()
    record = tmp_path / "record.jsonl"
    command = (sys.executable, "-S", str(AGENTS / "record_agent.py"), str(record))
    store = SqliteMailStore(db)
    try:
        store.add_agent(Agent(name="b1", capability="builder", channel="spawn", command=command))
    finally:
        store.close()
    planted = log_path(db, "b1")
    planted.parent.mkdir(mode=0o700)
    planted.symlink_to(target)
    d = daemons()
    assert d.cli("send", "--to", "b1", "--subject", "hello", "--body", "x").returncode == 0
    wait_for(lambda: read_jsonl(record), 20, "the delivery to b1")  # delivered all the same
    wait_for(lambda: d.events("proc.log_refused"), 20, "proc.log_refused")
    assert target.read_bytes() == PRECIOUS
    assert planted.is_symlink()
    assert d.alive()


# --- RotatingLog on real files -----------------------------------------------------------------


def write_refused(log: RotatingLog) -> list[dict[str, object]]:
    with capture_logs() as logs:
        log.write(b"agent output\n")
        log.write(b"more output\n")
        log.close()
    refused = [e for e in logs if e["event"] == "proc.log_refused"]
    assert len(refused) == 1, logs  # warned once, then the log stays off
    return refused


def test_a_symlink_is_refused(tmp_path: Path, target: Path) -> None:
    path = tmp_path / "logs" / "b1.log"
    path.parent.mkdir()
    path.symlink_to(target)
    refused = write_refused(RotatingLog(path, max_bytes=1 << 20, keep=2))
    assert "symlink" in str(refused[0]["reason"])
    assert target.read_bytes() == PRECIOUS


def test_a_symlinked_logs_directory_is_refused(tmp_path: Path, target: Path) -> None:
    (tmp_path / "logs").symlink_to(target.parent)
    write_refused(RotatingLog(tmp_path / "logs" / "b1.log", max_bytes=1 << 20, keep=2))
    assert sorted(os.listdir(target.parent)) == ["bashrc"]


def test_a_hard_link_to_our_file_is_refused(tmp_path: Path, target: Path) -> None:
    path = tmp_path / "logs" / "b1.log"
    path.parent.mkdir()
    os.link(target, path)
    write_refused(RotatingLog(path, max_bytes=1 << 20, keep=2))
    assert target.read_bytes() == PRECIOUS


def test_a_file_of_another_uid_is_refused(tmp_path: Path) -> None:
    assert os.geteuid() == 0, "chown to another uid needs root (CI runs as root)"
    path = tmp_path / "logs" / "b1.log"
    path.parent.mkdir()
    path.write_bytes(PRECIOUS)
    os.chown(path, NOBODY, NOBODY)
    write_refused(RotatingLog(path, max_bytes=1 << 20, keep=2))
    assert path.read_bytes() == PRECIOUS


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "b1.log"
    path.parent.mkdir()
    os.mkfifo(path)
    result: list[list[dict[str, object]]] = []
    writer = threading.Thread(
        target=lambda: result.append(write_refused(RotatingLog(path, max_bytes=100, keep=1))),
        daemon=True,
    )
    writer.start()
    writer.join(5)
    if writer.is_alive():  # blocked opening the FIFO: let it go, then fail
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        pytest.fail("opening a FIFO as the agent log blocked")
    assert result


def test_rotation_reopens_without_following_a_link_planted_meanwhile(
    tmp_path: Path, target: Path
) -> None:
    path = tmp_path / "logs" / "b1.log"
    log = RotatingLog(path, max_bytes=40, keep=2)
    log.write(b"x" * 30 + b"\n")
    log.close()  # between turns: the spawn channel opens a new log per turn
    path.unlink()
    os.link(target, path)
    with capture_logs() as logs:
        log.write(b"y" * 30 + b"\n")  # past max_bytes: would rotate, but the link is refused first
    assert target.read_bytes() == PRECIOUS
    assert [e["event"] for e in logs] == ["proc.log_refused"]


# --- the hook log ----------------------------------------------------------------------------


def test_the_hook_never_writes_its_log_through_a_planted_symlink(
    tmp_path: Path, target: Path
) -> None:
    state = tmp_path / "state"
    planted = state / "agentmaild" / "hooks.log"
    planted.parent.mkdir(parents=True)
    planted.symlink_to(target)
    env = {**base_env(tmp_path), "XDG_STATE_HOME": str(state)}
    done = subprocess.run(
        [sys.executable, "-m", "agentmaild", "hook", "UserPromptSubmit", "--agent", "b1"],
        input=b"{not json",  # the hook logs `hook.bad_input`
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert target.read_bytes() == PRECIOUS
    assert planted.is_symlink()


def test_a_refused_store_hook_log_falls_back_to_the_state_dir(
    tmp_path: Path, target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store" / "mail.db"
    planted = db.parent / "logs" / "hooks.log"
    planted.parent.mkdir(parents=True)
    os.link(target, planted)  # a hard link this time
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    log_line(str(db), "hook.failed", event="Stop", agent="b1", exc=RuntimeError("boom"))
    assert target.read_bytes() == PRECIOUS
    fallback = (tmp_path / "state" / "agentmaild" / "hooks.log").read_text()
    refusal, line = fallback.splitlines()
    assert "hook.log_refused" in refusal and str(planted) in refusal
    assert "hook.failed" in line and "boom" in line
