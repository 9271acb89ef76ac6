"""Mid-turn delivery through the vendors' own hooks (``hooks install --vendor V``), with the REAL
pinned CLIs against their loopback stand-ins: one headless turn whose model calls a tool several
times; urgent mail is stored while the turn runs (when the stand-in answers its first tool call).

- Codex (PostToolUse ``additionalContext``) and OpenCode (the plugin's ``tool.execute.after``,
  appended to the tool's output): the urgent mail is in a later model request of the same turn,
  acked once under a delivery of its own (history outcome ``mid-turn``).
- Gemini CLI (AfterTool ``additionalContext``, appended to the tool result): the same, but the
  batch stays claimed until AfterAgent acks it; a normal message sent at the same moment waits
  for the turn's end (default policy). A turn that fails after the mail was printed gives it
  back: the next prompt carries it, and it is read once that turn is answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
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
CALLS = 4  # tool calls in the long turn
# the tool each stand-in asks for, and what makes a request one of the long job's
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "codex": ("exec_command", {"cmd": "echo tool-ran"}),
    "gemini": ("read_file", {"file_path": "notes.txt"}),
    "opencode": ("read", {"filePath": "notes.txt"}),
}


def results_in(req: RecordedRequest) -> int:
    """Tool results the request carries (Responses: function_call_output; chat: role tool;
    Gemini: functionResponse parts)."""
    text = json.dumps(req.body)
    return (text.count('"function_call_output"') + text.count('"role": "tool"')
            + text.count('"functionResponse"'))  # fmt: skip


class Turn:
    """The stand-in's tool calls for the long job; stores the urgent mail at the first result."""

    def __init__(self, vendor: str, store: SqliteMailStore, project: Path) -> None:
        name, args = TOOLS[vendor]
        if "file_path" in args:
            args = {"file_path": str(project / "notes.txt")}
        self.call = (name, args)
        self.store = store
        self.urgent: str | None = None
        self.normal: str | None = None
        self.with_normal = vendor == "gemini"
        self.on_urgent: Callable[[], None] | None = None

    def __call__(self, req: RecordedRequest) -> tuple[str, dict[str, Any]] | None:
        if "LONGJOB" not in json.dumps(req.body):
            return None
        done = results_in(req)
        if done >= 1 and self.urgent is None:
            sent = Mailer(self.store).send(sender="bob", to="alice", subject="stop",
                                           body="URGENTBODY", priority="urgent")  # fmt: skip
            self.urgent = sent.ids[0]
            if self.with_normal:
                plain = Mailer(self.store).send(sender="bob", to="alice", subject="later",
                                                body="NORMALBODY", priority="normal")  # fmt: skip
                self.normal = plain.ids[0]
            if self.on_urgent is not None:
                self.on_urgent()
        return self.call if done < CALLS else None


def _run(
    vendor: str, binary: str, env: dict[str, str], cwd: Path, prompt: str, *, ok: bool = True
) -> None:
    if vendor == "codex":
        argv = [binary, "exec", "--json", "--skip-git-repo-check", prompt]
        stdin = ""
    elif vendor == "gemini":
        argv = [binary, "-p", prompt, "--output-format", "stream-json", "--skip-trust",
                "--approval-mode", "yolo"]  # fmt: skip
        stdin = ""
    else:
        argv, stdin = [binary, "run", "--format", "json"], prompt
    env = {**env, "PWD": str(cwd)}  # OpenCode takes its project directory from $PWD
    done = subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=200, check=False)  # fmt: skip
    assert (done.returncode == 0) is ok, (done.stdout[-2000:], done.stderr[-2000:])


def _project(tmp_path: Path) -> tuple[Path, Path, SqliteMailStore]:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "notes.txt").write_text("nothing to see\n")
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="alice", capability="builder"))
    store.add_agent(Agent(name="bob", capability="lead"))
    return project, db, store


def _install(vendor: str, binary: str, env: dict[str, str], db: Path) -> None:
    admin = {**env, "PATH": f"{Path(binary).parent}{os.pathsep}{env.get('PATH', '')}"}
    install = subprocess.run(
        [AGENTMAILD, "hooks", "install", "--vendor", vendor, "--agent", "alice",
         "--db", str(db)], env=admin, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_urgent_mail_reaches_the_running_turn_where_the_vendor_allows(
    vendor: str, tmp_path: Path
) -> None:
    binary = vendor_binary(vendor)
    project, db, store = _project(tmp_path)
    try:
        with VENDORS[vendor].api("all done") as api:
            _home, env = VENDORS[vendor].setup(tmp_path, api)
            turn = Turn(vendor, store, project)
            api.tool_call = turn
            _install(vendor, binary, env, db)
            _run(vendor, binary, env, project, "LONGJOB: read the notes again and again")
            assert turn.urgent is not None, "the turn never called its tool"
            carrying = [r for r in api.model_requests() if "URGENTBODY" in json.dumps(r.body)]
            message = store.get_message(turn.urgent)
            assert message is not None
            assert carrying, "the urgent mail never reached the model"
            first = carrying[0]
            assert "LONGJOB" in json.dumps(first.body) and 1 <= results_in(first) < CALLS + 1
            history = [(a.outcome, a.message_ids) for a in store.list_attempts(agent="alice")]
            assert history == [("mid-turn", (turn.urgent,))]
            assert message.read and message.acked_by is not None
            assert f"(delivery {message.acked_by})" in json.dumps(first.body)
            # delivered once: no later request of the turn carries it a second time
            assert all(json.dumps(r.body).count(f"1/1: {turn.urgent}") == 1 for r in carrying)
            if turn.normal is not None:  # default policy: normal mail waits for the turn's end
                assert not any("NORMALBODY" in json.dumps(r.body) for r in api.model_requests())
                later = store.get_message(turn.normal)
                assert later is not None and not later.read
                _run(vendor, binary, env, project, "NEXTTURN")
                nxt = json.dumps(api.wait_for("NEXTTURN", timeout=30).body)
                assert "NORMALBODY" in nxt and "URGENTBODY" not in nxt
    finally:
        store.close()


def test_gemini_turn_that_fails_gives_its_mid_turn_mail_back(tmp_path: Path) -> None:
    """The model call that carries the mid-turn mail fails (HTTP 429: Gemini drops that turn):
    the mail stays unread and unacked, the next prompt carries it once, and it is read then."""
    binary = vendor_binary("gemini")
    project, db, store = _project(tmp_path)
    try:
        with VENDORS["gemini"].api("all done") as api:
            _home, env = VENDORS["gemini"].setup(tmp_path, api)
            turn = Turn("gemini", store, project)
            turn.on_urgent = lambda: api.fail_next(1, status=429)
            api.tool_call = turn
            _install("gemini", binary, env, db)
            _run("gemini", binary, env, project, "LONGJOB: read the notes", ok=False)
            assert turn.urgent is not None, "the turn never called its tool"
            carrying = [r for r in api.model_requests() if "URGENTBODY" in json.dumps(r.body)]
            assert [r.answered_with for r in carrying] == [429]  # printed once, then it failed
            message = store.get_message(turn.urgent)
            assert message is not None and not message.read
            assert store.list_attempts(agent="alice") == []  # never acked as mid-turn
            api.clear_failures()
            _run("gemini", binary, env, project, "NEXTTURN")
            nxt = json.dumps(api.wait_for("NEXTTURN", timeout=30).body)
            assert nxt.count("URGENTBODY") == 1 and "NORMALBODY" in nxt
            message = store.get_message(turn.urgent)
            assert message is not None and message.read
    finally:
        store.close()
