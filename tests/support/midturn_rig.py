"""A busy agent for the mid-turn proof and bench: a real ``agentmaild serve`` delivering to the
REAL Claude Code CLI (headless spawn turns, agentmaild's hooks installed in the project) whose
model stand-in holds one long turn calling a tool about every second, until told to end it.

``LongTurn`` is the stand-in's reply: a ``Read`` tool call per request (with ``interval_s`` of
model latency) until ``end()``; then plain text, which ends the turn. What reached the model is
read off the stand-in's recorded requests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentmaild.control.client import poke
from agentmaild.control.protocol import socket_path_for
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.anthropic_stub import AnthropicStub, RecordedRequest
from tests.support.claude_env import claude_binary, claude_env, isolated_home
from tests.support.daemon import FAST, DaemonProc

AGENT = "worker"
TURN_END = "the long job is done"


class LongTurn:
    """The stand-in's reply: a tool call per request, ``interval_s`` apart, until ``end()``."""

    def __init__(self, file: Path, interval_s: float = 1.0, max_calls: int = 120) -> None:
        self.file = file  # what the tool reads
        self.interval_s = interval_s
        self.max_calls = max_calls
        self.ended = threading.Event()

    def end(self) -> None:
        self.ended.set()

    def __call__(self, body: dict[str, Any]) -> Any:
        messages = body.get("messages") or []
        calls = sum(1 for m in messages if m.get("role") == "assistant")
        if self.ended.is_set() or calls >= self.max_calls or not _in_long_job(messages):
            return TURN_END
        self.ended.wait(self.interval_s)  # the model "thinks" for a tool interval
        if self.ended.is_set():
            return TURN_END
        return [{"type": "tool_use", "name": "Read",
                 "input": {"file_path": str(self.file)}}]  # fmt: skip


def _in_long_job(messages: list[dict[str, Any]]) -> bool:
    """The turn the test started (its prompt says LONG-JOB), not a later turn's."""
    users = [m for m in messages if m.get("role") == "user"]
    last_prompt = next((m for m in reversed(users) if not _only_tool_results(m)), None)
    return last_prompt is not None and "LONG-JOB" in json.dumps(last_prompt)


def _tool_results(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "user" and _only_tool_results(m))


def _only_tool_results(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


@dataclass
class Rig:
    stub: AnthropicStub
    turn: LongTurn
    store: SqliteMailStore
    db: Path
    project: Path
    daemon: DaemonProc

    def send(self, subject: str, body: str, priority: str = "normal") -> str:
        sent = Mailer(self.store).send(sender="lead", to=AGENT, subject=subject, body=body,
                                       priority=priority)  # fmt: skip
        poke(socket_path_for(self.db), [AGENT])
        return sent.ids[0]

    def requests_with(self, text: str) -> list[RecordedRequest]:
        return [r for r in self.stub.messages_requests() if text in r.all_text()]

    def tool_calls_seen(self, marker: str) -> int:
        """The most tool results any request of the turn ``marker`` started carried."""
        return max((_tool_results(r.messages) for r in self.requests_with(marker)), default=0)

    def history(self, message_id: str) -> list[tuple[str, str]]:
        """(delivery id, outcome) of every history row holding ``message_id``."""
        rows = self.store.list_attempts(agent=AGENT)
        return [(a.delivery_id, a.outcome) for a in rows if message_id in a.message_ids]


def install_hooks(db: Path, env: dict[str, str], project: Path) -> None:
    argv = [sys.executable, "-m", "agentmaild", "--db", str(db), "hooks", "install",
            "--agent", AGENT, "--dir", str(project)]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "hook post-tool-use" in (project / ".claude" / "settings.local.json").read_text()


@contextmanager
def busy_claude(
    tmp: Path, interval_s: float = 1.0, policy: str | None = None, channel: str = "spawn"
) -> Iterator[Rig]:
    """The daemon, the stand-in and a registered Claude agent (``channel`` spawn: a process per
    turn; stdin: one long-lived process) with agentmaild's hooks installed in its project."""
    project = tmp / "proj"
    (project / ".claude").mkdir(parents=True)
    (project / "notes.txt").write_text("nothing to see\n")
    home = isolated_home(tmp, project)
    db = tmp / "store" / "mail.db"
    store = SqliteMailStore(db)
    turn = LongTurn(project / "notes.txt", interval_s)
    try:
        with AnthropicStub(turn) as stub:
            env = claude_env(home, stub.base_url)
            settings: dict[str, Any] = {"env": env}
            if policy is not None:
                settings["mid_turn_priority"] = policy
            store.add_agent(Agent(name="lead", capability="lead"))
            store.add_agent(Agent(name=AGENT, capability="builder", channel=channel,
                                  preset="claude", command=(claude_binary(),), cwd=str(project),
                                  settings=settings))  # fmt: skip
            tool_env = {k: v for k, v in env.items() if k != "HOME"}
            install_hooks(db, tool_env, project)
            daemon = DaemonProc(db, tmp, {**FAST, "AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.2"})
            daemon.start()
            try:
                yield Rig(stub, turn, store, db, project, daemon)
            finally:
                turn.end()
                if daemon.alive():
                    daemon.stop()
    finally:
        store.close()


def wait_request(rig: Rig, text: str, timeout: float = 60.0) -> tuple[RecordedRequest, float]:
    """The first request carrying ``text`` and when it arrived (``time.monotonic``)."""
    found = rig.stub.wait_for(text, timeout=timeout)
    return found, found.received_at


def start_long_turn(rig: Rig, calls: int = 2, timeout: float = 90.0) -> str:
    """Mail that opens the long turn; returns once ``calls`` tool calls have happened in it."""
    rig.send("the long job", "LONG-JOB: work until told otherwise")
    rig.stub.wait_for_count(lambda r: r.is_messages and "LONG-JOB" in r.all_text()
                            and _tool_results(r.messages) >= calls, 1, timeout)  # fmt: skip
    return "LONG-JOB"
