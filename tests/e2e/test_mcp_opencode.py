"""The REAL pinned OpenCode calls ``agentmaild mcp``'s tools through the config ``hooks install
--vendor opencode`` wrote: the loopback model stand-in answers the first model request with one
tool call, OpenCode runs it on our server, and the test checks the store and the tool result in
the model's next request."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.loopback_api import RecordedRequest
from tests.support.vendor_env import VENDORS, vendor_binary

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(300)]
AGENTMAILD = str(Path(sys.executable).parent / "agentmaild")


def _tool_texts(req: RecordedRequest) -> list[str]:
    return [t for role, t in req.texts if role == "tool"]


def _turn(tmp_path: Path, tool: str, args: dict[str, Any], before: Any = None) -> tuple[str, Any]:
    """One ``opencode run`` whose first model call asks for ``tool``; (the tool result the model
    got back, the store)."""
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    store.add_agent(Agent(name="bob", capability="lead", channel="pull"))
    called: list[bool] = []

    def tool_call(req: RecordedRequest) -> tuple[str, dict[str, Any]] | None:
        offered = [t.get("function", {}).get("name") for t in req.body.get("tools") or []]
        if called or _tool_texts(req) or f"agentmail_{tool}" not in offered:
            return None  # a side call (the title), or the turn after the call
        called.append(True)
        if before is not None:
            before(store)
        return f"agentmail_{tool}", args

    with VENDORS["opencode"].api("tool done") as api:
        api.tool_call = tool_call
        _, env = VENDORS["opencode"].setup(tmp_path, api)
        project = tmp_path / "proj"
        project.mkdir()
        install = [AGENTMAILD, "hooks", "install", "--vendor", "opencode", "--agent", "alice",
                   "--db", str(db)]  # fmt: skip
        done = subprocess.run(install, env=env, cwd=project, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        run = subprocess.run([vendor_binary("opencode"), "run", "--format", "json"], env=env,
                             cwd=project, input="do the mail task", capture_output=True,
                             text=True, timeout=180)  # fmt: skip
        assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
        results = [t for r in api.model_requests() for t in _tool_texts(r)]
    assert called and results, (run.stdout[-3000:], run.stderr[-2000:])
    return results[0], store


def test_opencode_sends_through_the_installed_server(tmp_path: Path) -> None:
    result, store = _turn(tmp_path, "send", {"to": "bob", "subject": "via mcp", "body": "hi bob"})
    [m] = store.inbox("bob")
    assert (m.from_agent, m.subject, m.body) == ("alice", "via mcp", "hi bob")
    assert m.id in result


def test_opencode_checks_mail_through_the_installed_server(tmp_path: Path) -> None:
    sent: list[str] = []

    def mail(store: Any) -> None:  # after the prompt's plugin ran: only the tool hands it over
        sent.extend(Mailer(store).send(sender="bob", to="alice", subject="plan",
                                       body="BODY-CHECK").ids)  # fmt: skip

    result, store = _turn(tmp_path, "check", {}, before=mail)
    assert "BODY-CHECK" in result and sent[0] in result and "<<<body " in result
    assert store.inbox("alice", unread_only=True) == []
