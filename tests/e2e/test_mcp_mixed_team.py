"""A mixed team that mails only through the MCP tools, delivered by one daemon (issue 29): a Claude
Code lead and a Codex, a Gemini CLI and an OpenCode builder, each a REAL pinned CLI against its
loopback model stand-in, spawned by the daemon's presets.

The operator's kick-off reaches the lead; the lead's model calls ``send`` to ``@builders``; the
daemon delivers each copy to a builder's turn, whose model calls ``reply`` on its copy; the daemon
delivers the three replies back to the lead. Every agent-to-agent message was written by a tool
call (its ``from`` the server's agent), and every tool result reached the model's next request."""

from __future__ import annotations

import json
import re
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from agentmaild.store.sqlite import SqliteMailStore
from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import claude_binary, claude_env, isolated_home
from tests.support.daemon import FAST, DaemonProc, daemon_factory
from tests.support.loopback_api import LoopbackApi, RecordedRequest
from tests.support.mcp_tools import offered, tool_texts
from tests.support.vendor_env import VENDORS, vendor_binary
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.vendors, pytest.mark.claude, pytest.mark.timeout(240)]

BOUND = 90.0
BUILDERS = {"cx": "codex", "gm": "gemini", "oc": "opencode"}
MSG_ID = re.compile(r"msg-[0-9a-z]{8,}")


def _add(daemon: DaemonProc, name: str, capability: str, preset: str, binary: str,
         cwd: Path, env: dict[str, str]) -> None:  # fmt: skip
    added = daemon.cli(
        "agents", "add", name, "-c", capability, "--channel", "spawn", "--preset", preset,
        "--command", binary, "--cwd", str(cwd), "--setting", "env=" + json.dumps(env),
    )  # fmt: skip
    assert added.returncode == 0, added.stderr


def _lead_model(body: dict[str, Any]) -> Any:
    """The lead's model: the kick-off turn calls ``send`` to @builders; every other answer is a
    closing line."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    blocks = [b for m in users if isinstance(m.get("content"), list) for b in m["content"]]
    done = any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)
    if done or "KICKOFF-1" not in json.dumps(users):
        return "noted"
    args = {"to": "@builders", "subject": "plan", "body": "build your part BROADCAST-1"}
    return [{"type": "tool_use", "name": "mcp__agentmail__send", "input": args}]


def _builder_model(name: str, vendor: str) -> Any:
    """A builder's model: the turn that carries its copy of the broadcast calls ``reply`` on it
    (Codex offers MCP tools only once its servers answered: until then it keeps the turn going
    with a harmless call of its own)."""
    state: dict[str, int] = {"called": 0, "warm": 0}

    def tool_call(req: RecordedRequest) -> tuple[str, dict[str, Any]] | None:
        text = req.all_text()
        if state["called"] or "BROADCAST-1" not in text or tool_texts(req):
            return None
        tool = offered(req, "reply")
        if tool is None:
            if vendor == "codex" and state["warm"] < 60:
                state["warm"] += 1
                time.sleep(0.3)
                return "get_goal", {}
            return None
        [copy] = set(MSG_ID.findall(text))  # the one message this turn was given
        state["called"] += 1
        return tool, {"id": copy, "body": f"{name} done REPLY-{name}"}

    return tool_call


def test_a_mixed_team_mails_only_through_mcp_tools(tmp_path: Path) -> None:
    binaries = {vendor: vendor_binary(vendor) for vendor in BUILDERS.values()}
    claude = claude_binary()
    db = tmp_path / "store" / "mail.db"
    with ExitStack() as stack:
        lead_api = stack.enter_context(AnthropicStub(_lead_model))
        apis: dict[str, LoopbackApi] = {}
        make = stack.enter_context(daemon_factory(db, tmp_path, defaults=FAST, text=True))
        daemon = make(start=False)
        lead_dir = tmp_path / "lead-proj"
        lead_dir.mkdir()
        _add(daemon, "lead", "lead", "claude", claude, lead_dir,
             claude_env(isolated_home(tmp_path / "lead", lead_dir), lead_api.base_url))  # fmt: skip
        for name, vendor in BUILDERS.items():
            api = stack.enter_context(VENDORS[vendor].api(f"{name} replied"))
            api.tool_call = _builder_model(name, vendor)
            apis[name] = api
            home, env = VENDORS[vendor].setup(tmp_path / name, api)
            cwd = tmp_path / f"{name}-proj"
            cwd.mkdir()
            _add(daemon, name, "builder", vendor, binaries[vendor], cwd, env)
            if vendor == "gemini":  # no flag adds a server to its turn: its project's settings
                trusted = {str(cwd): "TRUST_FOLDER"}
                (home / ".gemini" / "trustedFolders.json").write_text(json.dumps(trusted))
                wired = daemon.cli("hooks", "install", "--vendor", "gemini", "--agent", name,
                                   "--dir", str(cwd))  # fmt: skip
                assert wired.returncode == 0, wired.stderr
        daemon.start()
        started = time.monotonic()
        kick = daemon.cli("send", "--to", "lead", "-s", "go", "--body", "start KICKOFF-1")
        assert kick.returncode == 0, kick.stderr

        store = SqliteMailStore(db, readonly=True)
        stack.callback(store.close)

        def replies() -> list[Any] | None:
            got = [m for m in store.inbox("lead") if m.subject.startswith("Re:")]
            return got if len(got) == len(BUILDERS) and all(m.read for m in got) else None

        try:
            lead_replies = wait_for(replies, BOUND, "the builders' three replies, delivered")
        except AssertionError as exc:  # say where the exchange stopped
            seen = {n: [(bool(offered(r, "reply")), "BROADCAST-1" in r.all_text())
                        for r in api.model_requests()] for n, api in apis.items()}  # fmt: skip
            rows = [(m.from_agent, m.to_agent, m.subject, m.read) for m in store.list_messages()]
            raise AssertionError(f"{exc}; store {rows}; builders' requests {seen}") from None
        # The lead's send was its tool call: three copies from lead, one per builder.
        copies = {m.to_agent: m for name in BUILDERS for m in store.inbox(name)}
        assert sorted(copies) == sorted(BUILDERS)
        assert all(m.from_agent == "lead" and "BROADCAST-1" in m.body for m in copies.values())
        for reply in lead_replies:  # each builder's reply was its tool call on its copy
            assert reply.body == f"{reply.from_agent} done REPLY-{reply.from_agent}"
            copy = copies[reply.from_agent]
            assert reply.thread_id == (copy.thread_id or copy.id)
        assert sorted(r.from_agent for r in lead_replies) == sorted(BUILDERS)
        # Every tool result reached that model's next request: the lead's send ids, each reply id.
        sent_ids = [m.id for m in copies.values()]
        assert any(all(i in json.dumps(r.body) for i in sent_ids)
                   for r in lead_api.messages_requests())  # fmt: skip
        for reply in lead_replies:  # the stored reply may reach the lead before the builder's
            # CLI sends the tool's result on to its model: wait for that request too
            def answered(r: Any = reply) -> bool:
                requests = apis[r.from_agent].model_requests()
                return any(r.id in t for q in requests for t in tool_texts(q))

            wait_for(answered, BOUND, f"{reply.from_agent}'s tool result in its next request")
            lead_api.wait_for(reply.id, timeout=BOUND)  # delivered into a lead turn
        # The spawned turns' servers were the daemon's (the presets' relay), Gemini's its own.
        sessions = {e["agent"] for e in daemon.events("mcp.session")}
        assert {"lead", "cx", "oc"} <= sessions
        assert time.monotonic() - started < BOUND
        assert daemon.stop() == 0, daemon.tail()
