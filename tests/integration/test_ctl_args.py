"""``agentmaild ctl`` arguments against a real daemon: a ``timeout_s`` that is not a finite
number of seconds >= 0 is one clear error line (a JSON error object with ``--json``), exit 1, no
traceback, and nothing reaches the daemon; a good one still drains."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.support.daemon import DaemonProc, agent_cmd
from tests.support.waiting import wait_for

BAD = ("abc", "{}", "[1]", "null", "-5", "true", '"3"', "-0.5")
WORDS = "timeout_s: expected a non-negative number of seconds"


def test_bad_drain_timeouts_are_one_error_line_and_nothing_is_sent(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = daemons()
    worker = " ".join(agent_cmd("record_agent.py", "/dev/null"))
    added = d.cli("agents", "add", "worker", "-c", "builder", "--channel", "spawn", "--command",
                  worker)  # fmt: skip
    assert added.returncode == 0, added.stderr
    wait_for(lambda: "paused" in d.status_row("worker"), 20, "worker's delivery loop")
    for value in BAD:
        done = d.cli("ctl", "drain", f"timeout_s={value}")
        assert done.returncode == 1, (value, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == "", value
        assert done.stderr.splitlines() == [done.stderr.rstrip("\n")], value
        assert done.stderr.startswith(f"error: {WORDS}, got "), (value, done.stderr)
        as_json = d.cli("--json", "ctl", "drain", f"timeout_s={value}")
        assert as_json.returncode == 1 and "Traceback" not in as_json.stderr, value
        error = json.loads(as_json.stdout)["error"]
        assert error["code"] == "invalid" and error["message"].startswith(WORDS), (value, error)
    huge = d.cli("ctl", "drain", "timeout_s=1e999")
    assert huge.returncode == 1 and huge.stderr.count("\n") == 1 and "Traceback" not in huge.stderr
    assert d.status_row("worker")["paused"] is False  # no drain happened: nothing was sent
    ok = d.cli("--json", "ctl", "drain", "timeout_s=0.5")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["result"]["drained"] is True
    assert d.status_row("worker")["paused"] is True  # a good one drains


def test_the_daemon_refuses_the_same_values_from_any_client(
    daemons: Callable[..., DaemonProc],
) -> None:
    """Other clients speak the protocol too: the daemon checks with the same rule."""
    from agentmaild.control.client import request
    from agentmaild.control.protocol import socket_path_for
    from agentmaild.errors import ControlError

    d = daemons()
    for value in ({}, [1], None, -5, True, "3"):
        with pytest.raises(ControlError, match=f"^{WORDS}") as refused:
            request(socket_path_for(d.db), "drain", {"timeout_s": value}, 5.0)
        assert refused.value.code == "invalid", value
    assert d.ctl("ping")["pong"] is True
