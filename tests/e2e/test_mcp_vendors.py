"""The REAL pinned Codex and OpenCode call ``agentmaild mcp``'s tools through the config ``hooks
install --vendor V`` wrote: the loopback model stand-in answers the first model request that
offers the tool with one call of it, the CLI runs it on our server, and the test checks the store
and the tool result in the model's next request."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.loopback_api import RecordedRequest
from tests.support.mcp_tools import offered, tool_texts
from tests.support.vendor_env import VENDORS, vendor_binary

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(300)]
AGENTMAILD = str(Path(sys.executable).parent / "agentmaild")


VENDOR_NAMES = ["codex", "gemini", "opencode"]


def _argv(vendor: str) -> tuple[list[str], str]:
    prompt = "do the mail task"
    if vendor == "codex":
        return [vendor_binary("codex"), "exec", "--json", "--skip-git-repo-check", prompt], ""
    if vendor == "gemini":
        return [vendor_binary("gemini"), "-p", prompt, "--output-format", "stream-json"], ""
    return [vendor_binary("opencode"), "run", "--format", "json"], prompt


def _turn(
    tmp_path: Path, vendor: str, tool: str, args: dict[str, Any], before: Any = None
) -> tuple[str, Any]:
    """One headless turn whose first model call offering ``tool`` gets a call of it; (the tool
    result the model got back, the store)."""
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    store.add_agent(Agent(name="bob", capability="lead", channel="pull"))
    called: list[bool] = []
    warm: list[bool] = []

    def tool_call(req: RecordedRequest) -> tuple[str, dict[str, Any]] | None:
        name = offered(req, tool)
        if name is None and vendor == "codex" and not called and len(warm) < 60:
            # Codex starts MCP servers beside the turn and offers their tools from the first
            # request after they answered: keep the turn going meanwhile, with a harmless call.
            warm.append(True)
            time.sleep(0.5)
            return "get_goal", {}
        if called or name is None:
            return None  # a side call (the title), or the turn after the call
        called.append(True)
        if before is not None:
            before(store)
        return name, args

    with VENDORS[vendor].api("tool done") as api:
        api.tool_call = tool_call
        _home, env = VENDORS[vendor].setup(tmp_path, api)
        project = tmp_path / "proj"
        project.mkdir()
        if vendor == "gemini":  # a folder it does not trust gets no MCP servers
            trusted = {str(project): "TRUST_FOLDER"}
            (_home / ".gemini" / "trustedFolders.json").write_text(json.dumps(trusted))
        install = [AGENTMAILD, "hooks", "install", "--vendor", vendor, "--agent", "alice",
                   "--db", str(db)]  # fmt: skip
        done = subprocess.run(install, env=env, cwd=project, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        argv, stdin = _argv(vendor)
        run = subprocess.run(argv, env=env, cwd=project, input=stdin, capture_output=True,
                             text=True, timeout=180)  # fmt: skip
        assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
        results = [t for r in api.model_requests() for t in tool_texts(r)]
    assert called and results, (run.stdout[-3000:], run.stderr[-2000:])
    return results[0], store


@pytest.mark.parametrize("vendor", VENDOR_NAMES)
def test_the_cli_sends_through_the_installed_server(tmp_path: Path, vendor: str) -> None:
    args = {"to": "bob", "subject": "via mcp", "body": "hi bob"}
    result, store = _turn(tmp_path, vendor, "send", args)
    [m] = store.inbox("bob")
    assert (m.from_agent, m.subject, m.body) == ("alice", "via mcp", "hi bob")
    assert m.id in result


@pytest.mark.parametrize("vendor", VENDOR_NAMES)
def test_the_cli_checks_mail_through_the_installed_server(tmp_path: Path, vendor: str) -> None:
    sent: list[str] = []

    def mail(store: Any) -> None:  # after the prompt's plugin ran: only the tool hands it over
        sent.extend(Mailer(store).send(sender="bob", to="alice", subject="plan",
                                       body="BODY-CHECK").ids)  # fmt: skip

    result, store = _turn(tmp_path, vendor, "check", {}, before=mail)
    assert "BODY-CHECK" in result and sent[0] in result and "<<<body " in result
    assert store.inbox("alice", unread_only=True) == []


class _CodexWithASubagent:
    """Codex's model: the main thread spawns a subagent and waits for it, then calls ``send``
    itself; the subagent's thread calls ``send`` once (``state``: what was called)."""

    def __init__(self) -> None:
        self.state = {"spawned": 0, "waited": 0, "sub": 0, "own": 0, "warm": 0}

    def warm(self) -> tuple[str, dict[str, Any]] | None:  # Codex offers MCP tools once they answer
        if self.state["warm"] >= 80:
            return None
        self.state["warm"] += 1
        time.sleep(0.3)
        return "get_goal", {}

    def subagent(self, name: str | None, outs: list[str]) -> tuple[str, dict[str, Any]] | None:
        if self.state["sub"] or outs:
            return None
        if name is None:
            return self.warm()
        self.state["sub"] += 1
        return name, {"to": "bob", "subject": "from the subagent"}

    def __call__(self, req: RecordedRequest) -> tuple[str, dict[str, Any]] | None:
        text, name, outs = req.all_text(), offered(req, "send"), tool_texts(req)
        if "SUBTASK-S" in text and "MAIN-M" not in text:  # the subagent's thread
            return self.subagent(name, outs)
        state = self.state
        if "MAIN-M" not in text:
            return None
        if not state["spawned"]:
            state["spawned"] += 1
            return "multi_agent_v1/spawn_agent", {"message": "SUBTASK-S: mail bob"}
        if not state["waited"]:
            [spawned] = [json.loads(json.loads(o)) for o in outs if "agent_id" in o]
            state["waited"] += 1
            return "multi_agent_v1/wait_agent", {"targets": [spawned["agent_id"]],
                                                 "timeout_ms": 60000}  # fmt: skip
        if name is not None and not state["own"]:
            state["own"] += 1
            return name, {"to": "bob", "subject": "from alice herself"}
        return None if state["own"] else self.warm()


def test_a_codex_subagents_call_is_refused_and_the_agents_own_goes_through(
    tmp_path: Path,
) -> None:
    """Codex marks a spawned agent's tool calls in their ``_meta`` (``thread_source:
    subagent``): the main thread spawns a subagent, whose model calls ``send`` (refused, with the
    reason in its next request); after waiting for it, the main thread's own ``send`` is stored."""
    tool_call = _CodexWithASubagent()
    state = tool_call.state
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    store.add_agent(Agent(name="bob", capability="lead", channel="pull"))
    with VENDORS["codex"].api("done") as api:
        api.tool_call = tool_call
        _home, env = VENDORS["codex"].setup(tmp_path, api)
        project = tmp_path / "proj"
        project.mkdir()
        install = [AGENTMAILD, "hooks", "install", "--vendor", "codex", "--agent", "alice",
                   "--db", str(db)]  # fmt: skip
        assert subprocess.run(install, env=env, cwd=project, timeout=60).returncode == 0
        argv, _ = _argv("codex")
        argv[-1] = "MAIN-M: have a subagent mail bob"
        run = subprocess.run(argv, env=env, cwd=project, capture_output=True, text=True,
                             timeout=180)  # fmt: skip
        assert run.returncode == 0, run.stderr[-2000:]
        sub_results = [t for r in api.model_requests() if "MAIN-M" not in r.all_text()
                       for t in tool_texts(r) if "agentmail" in t]  # fmt: skip
    assert state["sub"] == 1 and state["own"] == 1, state
    assert sub_results and "refused to subagents" in sub_results[0]
    assert [m.subject for m in store.inbox("bob")] == ["from alice herself"]
