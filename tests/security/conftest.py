"""Harness for the security tests: real `agentmaild` subprocesses on real files and directories.

A command that should refuse to start is run with a deadline: on code that does not refuse, the
daemon would run forever, so the deadline expiring fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProc, base_env, daemon_factory
from tests.support.store_targets import STORE_TARGET_KINDS, StoreTarget, target_for

FAST = {
    "AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.1",
    "AGENTMAILD_DAEMON_SHUTDOWN_GRACE_S": "5",
}
REFUSAL_DEADLINE_S = 15.0


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    """The common default umask, so a mode the code forgets to set shows as 0644 / 0755."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "mail.db"


@pytest.fixture
def daemons(db: Path, tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    with daemon_factory(db, tmp_path, defaults=FAST, text=True) as make:
        yield make


@pytest.fixture(params=STORE_TARGET_KINDS)
def store_target(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StoreTarget]:
    """A store on each backend in turn (as in tests/integration): a file, or a fresh PostgreSQL
    database with agentmaild's schema."""
    yield from target_for(request, tmp_path, monkeypatch, migrated=True)


def run_cli(
    tmp: Path, *args: str, env: dict[str, str] | None = None, timeout: float = REFUSAL_DEADLINE_S
) -> subprocess.CompletedProcess[str]:
    """``agentmaild ARGS`` in a subprocess; still running at ``timeout`` fails the test."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "agentmaild", *args],
            env=base_env(tmp, env, FAST),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"`agentmaild {' '.join(args)}` still running after {timeout}s "
                             f"(it should have refused): {exc.stderr!r}") from None


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 1, exactly one ``error: …`` line on stderr holding every needle, no traceback."""
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
