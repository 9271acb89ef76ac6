"""Harness for the reliability tests: `agentmaild serve` as a real subprocess, real agents.

Every completion wait is on something observable (the store, a file, the socket) under a deadline;
only the *moments* of injected faults (a SIGKILL) are random, and their seed is printed on failure.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.history import connect_ro, orphan_problems
from tests.support.daemon import DaemonProc as DaemonProc  # re-exported for the tests
from tests.support.daemon import base_env as support_env
from tests.support.daemon import daemon_factory
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
    # Stand-in agents are silent until they exit, so the stall clock also runs through a cold
    # interpreter start: 3 s, not 1, or a loaded 2-core machine turns a good turn into a stall.
    "AGENTMAILD_CHANNELS_SPAWN_STALL_TIMEOUT_S": "3",
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


def assert_sound(db: Path) -> None:
    """How every reliability scenario ends: ``PRAGMA integrity_check`` says ok, no orphan rows."""
    result = integrity(db)
    assert result == "ok", f"integrity_check: {result}"
    conn = connect_ro(db)
    try:
        problems = orphan_problems(conn)
    finally:
        conn.close()
    assert problems == [], problems


def add_spawn(store: SqliteMailStore, name: str, command: tuple[str, ...], **kw: Any) -> None:
    store.add_agent(Agent(name=name, capability="builder", channel="spawn", command=command, **kw))


def base_env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    return support_env(tmp, extra, FAST)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "mail.db"


@pytest.fixture
def daemons(db: Path, tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    """``daemons(env=None, start=True, path=None)``; left-running daemons are SIGKILLed after."""
    with daemon_factory(db, tmp_path, defaults=FAST) as make:
        yield make
