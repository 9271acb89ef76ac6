"""``agentmaild wait`` against a real daemon: it returns once the mail is read or the delivery
acked, and otherwise exits non-zero saying why — the dead letter's error, the dead tmux pane's
last lines, the timeout with the last attempt's error."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc, agent_cmd, daemon_factory
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

FAST = {
    "AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.2",
    "AGENTMAILD_DAEMON_BACKOFF_INITIAL_S": "0.05",
    "AGENTMAILD_DAEMON_BACKOFF_MAX_S": "0.2",
    "AGENTMAILD_DAEMON_BACKOFF_JITTER": "0",
    "AGENTMAILD_DAEMON_MAX_ATTEMPTS": "3",
}


@pytest.fixture
def daemons(db: Path, tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    with daemon_factory(db, tmp_path, defaults=FAST, text=True) as make:
        yield make


def _send(store: SqliteMailStore, to: str) -> str:
    return Mailer(store).send(sender="bob", to=to, subject="build it", body="go").ids[0]


def test_it_returns_once_the_daemon_delivered(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    inbox = tmp_path / "in.jsonl"
    store.add_agent(Agent(name="ok", capability="builder", channel="spawn",
                          command=("tee", "-a", str(inbox))))  # fmt: skip
    d = daemons()
    mid = _send(store, "ok")
    done = d.cli("wait", "--read", mid, "--timeout", "60", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["ok"] is True and answer["agent"] == "ok" and answer["acked_by"]
    assert mid in inbox.read_text()
    acked = d.cli("wait", "--acked", answer["acked_by"], "--timeout", "30")
    assert acked.returncode == 0 and "acked by ok" in acked.stdout
    assert store.get_message(mid).read  # type: ignore[union-attr]


def test_a_dead_letter_ends_it_with_the_error(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    command = agent_cmd("flaky_agent.py", str(tmp_path / "count"), "99")
    store.add_agent(Agent(name="doomed", capability="builder", channel="spawn", command=command))
    d = daemons()
    mid = _send(store, "doomed")
    failed = d.cli("wait", "--read", mid, "--timeout", "60")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "dead letter dlv-" in failed.stderr and "for doomed: exit code 1" in failed.stderr
    assert store.dead_letters("doomed")  # it said so only once the daemon gave up
    as_json = json.loads(d.cli("wait", "--read", mid, "--json").stdout)
    assert as_json["ok"] is False and as_json["error"]["code"] == "failed"
    assert as_json["dead_letter"] == store.dead_letters("doomed")[0].delivery_id


def test_a_timeout_exits_3_naming_what_is_pending(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    store.add_agent(Agent(name="puller", capability="builder"))  # pull: nobody reads it
    d = daemons()
    mid = _send(store, "puller")
    late = d.cli("wait", "--read", mid, "--timeout", "0.6")
    assert late.returncode == 3
    assert "timed out after" in late.stderr and "unread by puller" in late.stderr
    idle = d.cli("wait", "--idle", "puller", "--timeout", "0.3", "--json")
    assert idle.returncode == 3 and json.loads(idle.stdout)["error"]["code"] == "timeout"
    assert d.cli("wait", "--read", mid, "--idle", "puller").returncode == 2
    missing = d.cli("wait", "--read", "msg-nothing00000", "--timeout", "1")
    assert missing.returncode == 1 and "no message" in missing.stderr


@pytest.fixture
def tmux_server() -> Iterator[str]:
    name = f"am-wait-{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False)


def _tmux(server: str, *args: str) -> str:
    done = subprocess.run(["tmux", "-L", server, *args], capture_output=True, text=True,
                          check=True, timeout=10)  # fmt: skip
    return done.stdout


def test_a_dead_pane_ends_it_with_the_panes_last_lines(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc], tmux_server: str
) -> None:
    _tmux(tmux_server, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "80", "-y", "24")
    _tmux(tmux_server, "set-option", "-g", "remain-on-exit", "on")
    _tmux(tmux_server, "respawn-pane", "-k", "-t", "w:0.0",
          "echo 'Not logged in - Please run /login'; sleep 0.2; exit 1")  # fmt: skip
    wait_for(lambda: _tmux(tmux_server, "display-message", "-p", "-t", "w:0.0",
                           "#{pane_dead}").strip() == "1", 10, "the pane to die")  # fmt: skip
    store.add_agent(Agent(name="ui", capability="builder", channel="tmux",
                          tmux_target="w:0.0", tmux_socket=tmux_server))  # fmt: skip
    d = daemons()
    mid = _send(store, "ui")
    dead = d.cli("wait", "--read", mid, "--timeout", "30")
    assert dead.returncode == 1, dead.stdout + dead.stderr
    assert "tmux pane w:0.0 is dead" in dead.stderr
    assert "| Not logged in - Please run /login" in dead.stderr
    _tmux(tmux_server, "kill-server")
    gone = d.cli("wait", "--read", mid, "--timeout", "30", "--json")
    assert gone.returncode == 1
    assert "tmux pane w:0.0 is gone" in json.loads(gone.stdout)["error"]["message"]


def test_idle_follows_the_sessions_turn_when_its_hooks_report_it(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    store.add_agent(Agent(name="ui", capability="builder"))  # an interactive session, hooks in it
    d = daemons(start=False)

    def hook(event: str) -> None:
        data = {"session_id": "s-1", "hook_event_name": event, "prompt": "hi", "source": "startup"}
        done = d.cli("hook", event, "--agent", "ui", stdin=json.dumps(data).encode())
        assert done.returncode == 0, done.stderr

    hook("UserPromptSubmit")  # a turn runs
    busy = d.cli("wait", "--idle", "ui", "--timeout", "0.5")
    assert busy.returncode == 3 and "ui's session is busy" in busy.stderr
    hook("Stop")  # the turn ended
    idle = d.cli("wait", "--idle", "ui", "--timeout", "10", "--json")
    assert idle.returncode == 0, idle.stdout + idle.stderr
    assert json.loads(idle.stdout)["ok"] is True


def test_mail_to_a_work_queue_is_waited_for_until_a_member_did_it(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    inbox = tmp_path / "w.jsonl"
    store.add_agent(Agent(name="w1", capability="builder", channel="spawn",
                          command=("tee", "-a", str(inbox))))  # fmt: skip
    d = daemons()
    assert d.cli("agents", "update", "w1", "--queue", "builds").returncode == 0
    sent = d.cli("send", "--from", "bob", "--to", "queue:builds", "--subject", "b", "--body", "go")
    mid = sent.stdout.strip()
    done = d.cli("wait", "--read", mid, "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr  # not "queue:builds is not registered"
    assert mid in inbox.read_text()
