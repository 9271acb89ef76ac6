"""Control-socket starvation: a same-user flood of idle connections must not lock the CLI out,
and `status` answers from the store when the daemon does not (real daemon, real flooder process).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmaild.control.client import request
from tests.support.daemon import DaemonProc, daemon_factory
from tests.support.sockets import Flooder, timed

FLOOD = 400
# Before the fix a ping waited behind ~340 idle peers, 2 s per 64 of them, and timed out (5 s).
REQUEST_WITHIN_S = 3.0  # measured ~0.2 s: the exchange itself
CLI_WITHIN_S = 10.0  # a cold CLI start on a machine the flood keeps busy (~3 s on 2 cores)
# `status` may wait ~1 s for the daemon on top of its usual run (a cold CLI start, ~1 s here,
# several when the machine is busy): measured against that usual run, before and after.
STATUS_EXTRA_S = 2.0


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProc]:
    with daemon_factory(tmp_path / "store" / "mail.db", tmp_path, defaults={}, text=True) as make:
        yield make()


def test_ping_gets_through_a_flood_of_idle_connections(daemon: DaemonProc) -> None:
    flood = Flooder(daemon.sock, FLOOD)
    try:
        for _ in range(3):
            done, took = timed(daemon.cli, "ctl", "ping", "--json", timeout=30)
            assert done.returncode == 0, done.stderr
            assert '"pong": true' in done.stdout
            assert took < CLI_WITHIN_S, f"`ctl ping` took {took:.2f}s under the flood"
            answer, took = timed(request, daemon.sock, "ping", timeout=REQUEST_WITHIN_S)
            assert answer["pong"] is True, f"the ping exchange took {took:.2f}s"
    finally:
        stats = flood.stats()
    assert daemon.alive()
    # The flood was real: all its connections were open at once and the daemon kept closing them.
    assert stats["connects"] > FLOOD and stats["closed_by_server"] > 0, stats


def test_status_falls_back_to_the_store_when_the_daemon_is_stopped(daemon: DaemonProc) -> None:
    assert daemon.cli("agents", "add", "b1", "--capability", "builder").returncode == 0
    for n in range(2):
        assert daemon.cli("send", "--to", "b1", "--subject", f"s{n}").returncode == 0
    answered, before = timed(daemon.cli, "status", timeout=30)
    assert answered.stdout.startswith("daemon: running")
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGSTOP)
    try:
        done, took = timed(daemon.cli, "status", timeout=30)
        as_json, took_json = timed(daemon.cli, "--json", "status", timeout=30)
    finally:
        daemon.proc.send_signal(signal.SIGCONT)
    # Resumed, the daemon answers again.
    answered, after = timed(daemon.cli, "status", timeout=30)
    assert answered.stdout.startswith("daemon: running")
    assert done.returncode == 0, done.stderr
    usual = max(before, after)
    assert max(took, took_json) < usual + STATUS_EXTRA_S, (took, took_json, before, after)
    lines = done.stdout.splitlines()
    assert lines[0] == "daemon: did not answer within 1s; counts read from the store"
    assert "(2 messages, 2 unread)" in lines[1]
    assert any(line.startswith("b1 ") for line in lines[2:])
    data = json.loads(as_json.stdout)
    assert data["daemon"] is None and data["running"] is True
    assert data["note"].startswith("did not answer")
    assert [row["unread"] for row in data["agents"]] == [2]
