"""Reasons a person can act on, through a real daemon: a Claude Code agent with no API key is
unavailable "not logged in" in ``status``, on the dashboard and in ``wait``; a dead tmux pane's
reason carries its last screen lines; ``agents add --preset codex`` with no codex on PATH warns
with the install hint and still registers the agent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.integration.test_wait import _tmux, tmux_server  # noqa: F401 (the fixture)
from tests.support.browser import dashboard_url
from tests.support.claude_env import claude_binary
from tests.support.daemon import DaemonProc, base_env
from tests.support.http_api import base_url, http_env
from tests.support.vendor_env import vendor_binary
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(150)

SLOW_RETRY = {"AGENTMAILD_DAEMON_BACKOFF_INITIAL_S": "30", "AGENTMAILD_DAEMON_BACKOFF_MAX_S": "30"}
CLAUDE_FIX = "claude: not logged in (no API key): set ANTHROPIC_API_KEY or run `claude /login`"


def _agent_row(d: DaemonProc, name: str) -> dict[str, Any] | None:
    done = d.cli("status", "--json")
    rows = json.loads(done.stdout).get("agents") or [] if done.returncode == 0 else []
    return next((r for r in rows if r["agent"] == name), None)


def _reason(d: DaemonProc, name: str) -> str:
    row = _agent_row(d, name)
    return str((row or {}).get("busy_reason") or "")


def test_a_claude_agent_without_a_key_is_unavailable_not_logged_in(
    store: SqliteMailStore,
    daemons: Callable[..., DaemonProc],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in [k for k in os.environ if k.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(key)  # the daemon's environment: no key to inherit
    home = tmp_path / "empty-home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    store.add_agent(Agent(name="reviewer", capability="reviewer", channel="spawn", preset="claude",
                          command=(claude_binary(),), cwd=str(tmp_path),
                          settings={"env": env}))  # fmt: skip
    d = daemons({**http_env(), **SLOW_RETRY})  # the reason stays while it backs off
    mid = Mailer(store).send(sender="bob", to="reviewer", subject="hi", body="one word").ids[0]
    reason = wait_for(lambda: CLAUDE_FIX in _reason(d, "reviewer") and _reason(d, "reviewer"),
                      90, "the not-logged-in reason in status")  # fmt: skip
    assert reason.startswith("unavailable: ") and "(it said: Not logged in" in reason
    text = d.cli("status").stdout
    assert f"reviewer: {reason}" in text  # the whole reason, below the table's cut column
    waited = d.cli("wait", "--read", mid, "--timeout", "1")
    assert waited.returncode == 3 and CLAUDE_FIX in waited.stderr
    client = httpx.Client(base_url=base_url(d), timeout=20)
    assert client.get(dashboard_url(d)).status_code == 303  # the session cookie, then the page
    page = client.get("/").text
    assert "claude: not logged in (no API key): set ANTHROPIC_API_KEY" in page
    assert store.get_message(mid).read is False  # type: ignore[union-attr]


def _dead_with_status(server: str, target: str) -> str | None:
    """The dead pane's exit status as tmux records it ("" until it does), None while it lives.

    A tmux built with libutempter can miss the SIGCHLD of a pane's program (utempter's handler
    stands in while tmux closes the pane's pty, tmux#311): the program stays a zombie and tmux
    leaves ``pane_dead_status`` empty until some SIGCHLD makes it reap, so send it one, as tmux's
    maintainer suggests there."""
    said = _tmux(server, "display-message", "-p", "-t", target, "#{pane_dead} #{pane_dead_status}")
    dead, _, status = said.strip().partition(" ")
    if dead != "1":
        return None
    if not status:
        os.kill(int(_tmux(server, "display-message", "-p", "#{pid}")), signal.SIGCHLD)
    return status


def test_a_dead_pane_is_unavailable_with_its_last_lines(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc], tmux_server: str  # noqa: F811 (test_wait's fixture)
) -> None:
    _tmux(tmux_server, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "100", "-y", "24")
    _tmux(tmux_server, "set-option", "-g", "remain-on-exit", "on")
    # It exits on a cue once its line is on the screen: tmux can drop the output of a program
    # that exits the moment it writes, and then no last line could be quoted.
    _tmux(tmux_server, "respawn-pane", "-k", "-t", "w:0.0",
          "echo 'getaddrinfo ENOTFOUND api.anthropic.com'; read go; exit 7")  # fmt: skip
    wait_for(lambda: "ENOTFOUND" in _tmux(tmux_server, "capture-pane", "-p", "-t", "w:0.0"), 10,
             "the pane's line on its screen")  # fmt: skip
    _tmux(tmux_server, "send-keys", "-t", "w:0.0", "Enter")
    wait_for(lambda: _dead_with_status(tmux_server, "w:0.0") == "7", 10,
             "the pane to die with its status")  # fmt: skip
    store.add_agent(Agent(name="ui", capability="builder", channel="tmux",
                          tmux_target="w:0.0", tmux_socket=tmux_server))  # fmt: skip
    d = daemons(SLOW_RETRY)
    Mailer(store).send(sender="bob", to="ui", subject="hi", body="go")
    reason = wait_for(lambda: "is dead" in _reason(d, "ui") and _reason(d, "ui"), 20,
                      "the dead pane in status")  # fmt: skip
    assert reason.startswith("unavailable: pane w:0.0 is dead (")
    assert "exit status 7" in reason
    assert "its last lines: getaddrinfo ENOTFOUND api.anthropic.com" in reason


def _add(tmp_path: Path, path: str, name: str) -> subprocess.CompletedProcess[str]:
    env = {**base_env(tmp_path), "PATH": path}
    db = str(tmp_path / "s" / "mail.db")
    argv = [sys.executable, "-m", "agentmaild", "--db", db, "agents", "add", name,
            "-c", "builder", "--channel", "spawn", "--preset", "codex"]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_agents_add_warns_of_a_missing_executable_with_the_install_hint(tmp_path: Path) -> None:
    missing = _add(tmp_path, "/usr/bin:/bin", "cx")
    assert missing.returncode == 0, missing.stderr  # a warning, not a refusal
    assert "warning: --preset codex: no 'codex' executable on PATH" in missing.stderr
    assert "npm install -g @openai/codex" in missing.stderr and "make vendors" in missing.stderr
    assert missing.stdout.strip() == "added cx"
    there = os.path.dirname(vendor_binary("codex"))
    found = _add(tmp_path, f"{there}:/usr/bin:/bin", "cx2")
    assert found.returncode == 0 and "warning" not in found.stderr
