"""An impostor on the control socket path: the CLI tells it nothing and believes nothing from it.

The impostor is a real process listening on the real socket path, as another uid (file owner, or
only its peer credentials) or as our uid with malformed answers; the CLI is the real ``agentmaild``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentmaild.control.protocol import socket_path_for
from tests.support.daemon import DaemonProc
from tests.support.sockets import Impostor


@pytest.fixture
def cli(tmp_path: Path) -> DaemonProc:
    """The real CLI on a store in ``tmp_path`` (no daemon is started)."""
    db = tmp_path / "store" / "mail.db"
    db.parent.mkdir()
    return DaemonProc(db, tmp_path, text=True)


def one_error_line(done: object) -> str:
    stderr: str = done.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.parametrize("mode", ["foreign-file", "foreign-peer"])
@pytest.mark.parametrize("command", [("ctl", "ping"), ("ctl", "wake"), ("status",)])
def test_a_socket_of_another_uid_is_told_nothing(
    cli: DaemonProc, mode: str, command: tuple[str, ...]
) -> None:
    impostor = Impostor(socket_path_for(cli.db), mode)
    try:
        done = cli.cli(*command)
    finally:
        received = impostor.received()
    assert done.returncode == 1, done.stdout
    assert "uid 65534" in one_error_line(done)
    assert done.stdout == ""
    # foreign-file: never connected; foreign-peer: connected, checked, hung up without a byte.
    assert all(got == "" for got in received), received


def test_send_skips_the_poke_to_an_impostor_silently(cli: DaemonProc) -> None:
    assert cli.cli("agents", "add", "b1", "--capability", "builder").returncode == 0
    impostor = Impostor(socket_path_for(cli.db), "foreign-peer")
    try:
        sent = cli.cli("send", "--to", "b1", "--subject", "hello", "--body", "in the store")
    finally:
        received = impostor.received()
    assert sent.returncode == 0, sent.stderr
    assert sent.stderr == ""
    assert all(got == "" for got in received), received  # no `wake` reached it
    inbox = cli.cli("--json", "inbox", "--agent", "b1")
    assert "hello" in inbox.stdout  # the mail is in the store all the same


def reply(result: object) -> str:
    return json.dumps({"v": 1, "ok": True, "result": result})


TOTALS = {"messages": 0, "unread": 0}
DAEMON = {"pid": 1, "uptime_s": 3.0, "version": "9"}
ROW = {"agent": "b1", "channel": "pull", "state": "active", "unread": 0, "in_flight": 0}

# Replies that break the protocol itself (not an object, ...) are tests/unit/test_control.py's.
MALFORMED = {
    "no daemon": reply({"agents": [], "totals": TOTALS}),
    "daemon without uptime": reply({"daemon": {"pid": 1}, "agents": [], "totals": TOTALS}),
    "agents not a list": reply({"daemon": DAEMON, "agents": "b1", "totals": TOTALS}),
    "row without dead letters": reply({"daemon": DAEMON, "agents": [ROW], "totals": TOTALS}),
    "count as text": reply(
        {"daemon": DAEMON, "agents": [{**ROW, "dead_letters": "2"}], "totals": TOTALS}
    ),
    "bad last delivery": reply(
        {
            "daemon": DAEMON,
            "agents": [{**ROW, "dead_letters": 0, "last_delivery": {"result": "ok"}}],
            "totals": TOTALS,
        }
    ),
    "totals missing": reply({"daemon": DAEMON, "agents": []}),
}


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
def test_status_with_a_malformed_answer_is_one_error_line(cli: DaemonProc, answer: str) -> None:
    impostor = Impostor(socket_path_for(cli.db), "same", answer)
    try:
        done = cli.cli("status")
        as_json = cli.cli("--json", "status")
    finally:
        impostor.received()
    assert done.returncode == 1
    one_error_line(done)
    assert done.stdout == ""
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["code"] == "protocol"


def test_metrics_without_text_is_one_error_line(cli: DaemonProc) -> None:
    impostor = Impostor(socket_path_for(cli.db), "same", reply({"lines": 3}))
    try:
        done = cli.cli("ctl", "metrics")
    finally:
        impostor.received()
    assert done.returncode == 1
    assert "text" in one_error_line(done)
