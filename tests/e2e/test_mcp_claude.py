"""The real pinned Claude Code CLI calls ``agentmaild mcp``'s tools through the config
``hooks install --vendor claude`` wrote (``.mcp.json``, approved in settings.local.json): the
loopback model stand-in answers the first request with a tool call, the CLI runs it, and the test
checks the store and the tool result in the model's next request."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import (
    claude_binary,
    claude_env,
    isolated_home,
    run_print,
    user_line,
)
from tests.support.daemon import DaemonProc

pytestmark = [pytest.mark.claude, pytest.mark.timeout(120)]
EXE = str(Path(sys.executable).parent / "agentmaild")


@pytest.fixture(scope="session")
def claude_bin() -> str:
    return claude_binary()


@pytest.fixture
def stub() -> Iterator[AnthropicStub]:
    with AnthropicStub("ok") as s:
        yield s


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool result the conversation carries (the CLI may add a system note after it)."""
    blocks = [b for m in body["messages"] if m["role"] == "user"
              for b in (m["content"] if isinstance(m["content"], list) else [])]  # fmt: skip
    return [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]


def _calls(tool: str, args: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    """The first request: one call of ``tool``; every later one: a closing line."""
    called: list[bool] = []

    def reply(body: dict[str, Any]) -> Any:
        if called or _tool_results(body):
            return "tool done"
        called.append(True)
        return [{"type": "tool_use", "name": f"mcp__agentmail__{tool}", "input": args}]

    return reply


def _result_text(stub: AnthropicStub) -> str:
    found = [r for r in stub.messages_requests() if _tool_results(r.body)]
    assert found, "no request carried the tool's result back to the model"
    return json.dumps(_tool_results(found[0].body))


def _project(tmp_path: Path) -> tuple[Path, Path, SqliteMailStore]:
    project, db = tmp_path / "proj", tmp_path / "store" / "mail.db"
    project.mkdir()
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    store.add_agent(Agent(name="bob", capability="lead", channel="pull"))
    done = subprocess.run([EXE, "hooks", "install", "--vendor", "claude", "--agent", "alice",
                           "--dir", str(project), "--db", str(db)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return project, db, store


def test_claude_sends_through_the_installed_server(
    claude_bin: str, stub: AnthropicStub, tmp_path: Path
) -> None:
    project, _, store = _project(tmp_path)
    stub.reply = _calls("send", {"to": "bob", "subject": "via mcp", "body": "hello bob"})
    env = claude_env(isolated_home(tmp_path, project), stub.base_url)
    run = run_print(claude_bin, [user_line("tell bob MARKER-M")], env=env, cwd=project,
                    extra_args=["--allowedTools", "mcp__agentmail"])  # fmt: skip
    assert run.returncode == 0, run.stderr
    [m] = store.inbox("bob")
    assert (m.from_agent, m.subject, m.body) == ("alice", "via mcp", "hello bob")
    # Claude Code hands the model the structured content: the ids of what was stored.
    result = _result_text(stub)
    assert m.id in result and "recipients" in result


def test_claude_checks_mail_through_the_installed_server(
    claude_bin: str, stub: AnthropicStub, tmp_path: Path
) -> None:
    project, db, store = _project(tmp_path)
    call_check = _calls("check", {})
    sent: list[str] = []

    def reply(body: dict[str, Any]) -> Any:
        # The mail arrives once the prompt's hooks have run: only the tool can hand it over.
        if not sent:
            from agentmaild.mail.mailer import Mailer

            sender = SqliteMailStore(db)
            sent.extend(Mailer(sender).send(sender="bob", to="alice", subject="plan",
                                            body="BODY-CHECK").ids)  # fmt: skip
            sender.close()
        return call_check(body)

    stub.reply = reply
    env = claude_env(isolated_home(tmp_path, project), stub.base_url)
    run = run_print(claude_bin, [user_line("any mail? MARKER-C")], env=env, cwd=project,
                    extra_args=["--allowedTools", "mcp__agentmail"])  # fmt: skip
    assert run.returncode == 0, run.stderr
    text = _result_text(stub)
    assert "BODY-CHECK" in text and sent[0] in text and "<<<body " in text
    assert store.inbox("alice", unread_only=True) == []


@pytest.mark.parametrize("daemon", [True, False], ids=["daemon-served", "cold"])
def test_the_spawn_presets_flags_give_claude_the_server(
    claude_bin: str, stub: AnthropicStub, tmp_path: Path, daemon: bool
) -> None:
    """No file installed: the flags the claude preset adds to each turn (``--mcp-config``,
    ``--allowedTools mcp__agentmail``) and the turn's AGENTMAIL_DB are enough. The relay they
    start is served by the store's daemon when one runs, else it is ``agentmaild mcp``."""
    from agentmaild.channels.mcp_wiring import claude_flags

    project, db = tmp_path / "proj", tmp_path / "store" / "mail.db"
    project.mkdir()
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    store.add_agent(Agent(name="bob", capability="lead", channel="pull"))
    stub.reply = _calls("send", {"to": "bob", "subject": "from a spawned turn"})
    env = claude_env(isolated_home(tmp_path, project), stub.base_url)
    env.update(AGENTMAIL_DB=str(db), AGENTMAIL_AGENT="alice")
    served = DaemonProc(db, tmp_path).start() if daemon else None
    try:
        run = run_print(claude_bin, [user_line("tell bob MARKER-P")], env=env, cwd=project,
                        extra_args=claude_flags("alice"))  # fmt: skip
        assert run.returncode == 0, run.stderr
        [m] = store.inbox("bob")
        assert (m.from_agent, m.subject) == ("alice", "from a spawned turn")
        assert m.id in _result_text(stub)
        if served is not None:
            assert [e["agent"] for e in served.events("mcp.session")] == ["alice"]
    finally:
        if served is not None:
            served.stop()


def _first_user_text(body: dict[str, Any]) -> str:
    first = next((m for m in body["messages"] if m["role"] == "user"), {"content": ""})
    return json.dumps(first["content"])


@pytest.mark.parametrize("wiring", ["installed", "preset"])
def test_a_subagents_call_of_the_tools_is_refused_and_the_agents_own_goes_through(
    claude_bin: str, stub: AnthropicStub, tmp_path: Path, wiring: str
) -> None:
    """Claude Code names the subagent (``agent_id``) in a hook's input; the PreToolUse hook for
    our tools (``hooks install``'s, or the spawn preset's ``--settings``) refuses the call, so the
    subagent never sends as alice."""
    from agentmaild.channels.mcp_wiring import claude_flags

    project, db, store = _project(tmp_path)
    flags = ["--allowedTools", "mcp__agentmail"]
    if wiring == "preset":  # no file of ours in the project: only the preset's flags
        (project / ".mcp.json").unlink()
        (project / ".claude" / "settings.local.json").unlink()
        flags = claude_flags("alice")
    sub_send = {"to": "bob", "subject": "from the subagent"}
    own_send = {"to": "bob", "subject": "from alice herself"}

    def reply(body: dict[str, Any]) -> Any:
        done = len(_tool_results(body))
        if "SUBTASK-S" in _first_user_text(body):  # the subagent's conversation
            if done:
                return "subagent finished"
            return [{"type": "tool_use", "name": "mcp__agentmail__send", "input": sub_send}]
        if "MARKER-SUB" not in _first_user_text(body):
            return "ok"  # a side request (a title, a summary)
        if done == 0:
            task = {"description": "mail bob", "prompt": "SUBTASK-S: mail bob",
                    "subagent_type": "general-purpose"}  # fmt: skip
            return [{"type": "tool_use", "name": "Task", "input": task}]
        if done == 1:
            return [{"type": "tool_use", "name": "mcp__agentmail__send", "input": own_send}]
        return "all done"

    stub.reply = reply
    env = claude_env(isolated_home(tmp_path, project), stub.base_url)
    env.update(AGENTMAIL_DB=str(db), AGENTMAIL_AGENT="alice")
    run = run_print(claude_bin, [user_line("delegate MARKER-SUB")], env=env, cwd=project,
                    extra_args=flags)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert [m.subject for m in store.inbox("bob")] == ["from alice herself"]
    refused = [b for r in stub.messages_requests() if "SUBTASK-S" in _first_user_text(r.body)
               for b in _tool_results(r.body)]  # fmt: skip
    assert refused and refused[0].get("is_error") is True, refused
    assert "refused to subagents" in json.dumps(refused[0])
