"""Harness for the reliability tests: `agentmaild serve` as a real subprocess, real agents.

Every completion wait is on something observable (the store, a file, the socket) under a deadline;
only the *moments* of injected faults (a SIGKILL) are random, and their seed is printed on failure.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmaild.control.client import request
from agentmaild.control.protocol import socket_path_for
from agentmaild.errors import ControlError
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.waiting import read_jsonl as read_jsonl  # re-exported for the tests
from tests.support.waiting import wait_for as wait_for

AGENTS = Path(__file__).resolve().parent.parent / "agents"

# Small intervals: a retry costs milliseconds, three failures make a dead letter.
FAST = {
    "AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.1",
    "AGENTMAILD_DAEMON_BACKOFF_INITIAL_S": "0.02",
    "AGENTMAILD_DAEMON_BACKOFF_MAX_S": "0.2",
    "AGENTMAILD_DAEMON_MAX_ATTEMPTS": "3",
    "AGENTMAILD_DAEMON_SHUTDOWN_GRACE_S": "5",
    "AGENTMAILD_CHANNELS_SPAWN_STALL_TIMEOUT_S": "1",
    "AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S": "0.2",
}


def agent_cmd(script: str, *args: str) -> tuple[str, ...]:
    """A stand-in agent command; ``-S`` skips site-packages, so each turn starts in ~15 ms."""
    return (sys.executable, "-S", str(AGENTS / script), *args)


def integrity(db: Path) -> str:
    conn = sqlite3.connect(str(db), timeout=10)
    try:
        return ";".join(r[0] for r in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


def add_spawn(store: SqliteMailStore, name: str, command: tuple[str, ...], **kw: Any) -> None:
    store.add_agent(Agent(name=name, capability="builder", channel="spawn", command=command, **kw))


def base_env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        **FAST,
        **(extra or {}),
        "XDG_CONFIG_HOME": str(tmp / "xdg"),
        "AGENTMAILD_LOG_FORMAT": "json",
    }
    for key in ("AGENTMAIL_DB", "AGENTMAILD_CONFIG", "AGENTMAIL_AGENT"):
        env.pop(key, None)
    return env


class DaemonProc:
    """One `agentmaild serve` subprocess; its JSON log is appended to ``log``."""

    def __init__(self, db: Path, tmp: Path, env: dict[str, str] | None = None) -> None:
        self.db = db
        self.sock = socket_path_for(db)
        self.log = tmp / "daemon.log"
        self.env = base_env(tmp, env)
        self.proc: subprocess.Popen[bytes] | None = None

    def cli(
        self, *args: str, stdin: bytes | None = None, timeout: float = 30
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "agentmaild", *args, "--db", str(self.db)],
            env=self.env,
            capture_output=True,
            input=stdin,
            timeout=timeout,
        )

    def start(self) -> DaemonProc:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agentmaild", "serve", "--db", str(self.db)],
                env=self.env,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        wait_for(self.ready, 20, "the daemon to answer ping")
        return self

    def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"daemon exited {self.proc.returncode}: {self.tail()}")
        try:
            return bool(request(self.sock, "ping", timeout=1.0)["pong"])
        except (ControlError, OSError):
            return False

    def ctl(self, cmd: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        return request(self.sock, cmd, args, timeout=10.0)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 20) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        if not self.log.exists():
            return out
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == name:
                out.append(event)
        return out

    def tail(self, n: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "mail.db"


@pytest.fixture
def daemons(db: Path, tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    """``daemons(env=None, start=True)``; every daemon left running is SIGKILLed at teardown."""
    started: list[DaemonProc] = []

    def make(
        env: dict[str, str] | None = None, start: bool = True, path: Path | None = None
    ) -> DaemonProc:
        d = DaemonProc(path or db, tmp_path, env)
        started.append(d)
        return d.start() if start else d

    yield make
    for d in started:
        if d.alive():
            assert d.proc is not None
            d.proc.kill()
            d.proc.wait(10)
