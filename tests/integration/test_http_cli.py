"""The CLI and the hook in URL mode (``AGENTMAIL_URL`` + ``AGENTMAIL_TOKEN``) against a live
daemon: the same output and exit codes as on the store file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc
from tests.support.http_api import base_url, http_env, mint

ID_RE = re.compile(r"msg-[a-z0-9]+")


class Both:
    """Run one command on the store file and through the API; compare what they print."""

    def __init__(self, d: DaemonProc, token: str) -> None:
        self.d = d
        self.remote_env = {"AGENTMAIL_URL": base_url(d), "AGENTMAIL_TOKEN": token}

    def local(self, *args: str, env: dict[str, str] | None = None,
              stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        return self._run(args, {**self.d.env, **(env or {})}, stdin, db=True)

    def remote(self, *args: str, env: dict[str, str] | None = None,
               stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        # No --db, and a store path that does not exist: the file is never what answers.
        full = {**self.d.env, **self.remote_env, "AGENTMAIL_DB": "/nonexistent/mail.db",
                **(env or {})}  # fmt: skip
        return self._run(args, full, stdin, db=False)

    def _run(self, args: tuple[str, ...], env: dict[str, str], stdin: str | None,
             db: bool) -> subprocess.CompletedProcess[str]:  # fmt: skip
        argv = [sys.executable, "-m", "agentmaild", *args]
        if db:
            argv += ["--db", str(self.d.db)]
        return subprocess.run(argv, env=env, capture_output=True, text=True, input=stdin,
                              timeout=60)  # fmt: skip

    def same(self, *args: str) -> subprocess.CompletedProcess[str]:
        here, there = self.local(*args), self.remote(*args)
        assert (there.returncode, there.stdout, there.stderr) == (
            here.returncode, here.stdout, here.stderr), args  # fmt: skip
        return here


@pytest.fixture
def both(store: SqliteMailStore, daemons: Callable[..., DaemonProc]) -> Both:
    for name in ("alice", "carol"):
        store.add_agent(Agent(name=name, capability="builder", channel="pull"))
    d = daemons(http_env())
    return Both(d, mint(d, "operator"))


def test_reading_commands_print_the_same(both: Both) -> None:
    sent = both.remote("send", "--to", "alice", "--subject", "über", "--body", "b\nody",
                       "--from", "bob", "--type", "question", "--priority", "high")  # fmt: skip
    assert sent.returncode == 0 and ID_RE.fullmatch(sent.stdout.strip())
    mid = sent.stdout.strip()
    payload = '{"taskId":"t1","branch":"b1","exitCode":0,"filesModified":["a.py"]}'
    assert both.remote("send", "--to", "alice", "--subject", "done", "--from", "bob",
                       "--type", "worker_done", "--payload", payload).returncode == 0  # fmt: skip
    reply = both.remote("reply", mid, "--body", "answer", "--from", "alice", "--json")
    rid = json.loads(reply.stdout)["ids"][0]
    for args in (
        ("inbox", "--agent", "alice"), ("inbox", "--agent", "alice", "--unread", "--json"),
        ("read", mid), ("read", rid, "--json"), ("thread", mid), ("thread", rid, "--json"),
        ("list", "--to", "alice"), ("list", "--from", "bob", "--json", "-n", "1"),
        ("inbox", "--agent", "ghost"), ("inbox", "--agent", "ghost", "--json"),
        ("read", "msg-doesnotexist"), ("read", "../etc/passwd"), ("thread", "msg-nothread"),
        ("check",), ("send", "--to", "nobody", "--subject", "s", "--from", "bob"),
        ("send", "--to", "alice", "--subject", "s", "--from", "bob", "--type", "worker_done",
         "--payload", "{bad"),
    ):  # fmt: skip
        both.same(*args)
    assert both.same("check").returncode == 2  # usage: no agent
    assert both.same("inbox", "--agent", "ghost").returncode == 1


def _normalised(text: str, agent: str) -> str:
    return ID_RE.sub("ID", text).replace(agent, "AGENT")


def _stamps(text: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "T", text)


def test_check_ack_and_inject_take_the_same_mail(both: Both, store: SqliteMailStore) -> None:
    for agent in ("alice", "carol"):
        for subject in ("first", "second"):
            both.local("send", "--to", agent, "--subject", subject, "--body", "x" * 50,
                       "--from", "bob")  # fmt: skip
    here = both.local("check", "--inject", "--agent", "carol")
    there = both.remote("check", "--inject", "--agent", "alice")
    assert there.returncode == here.returncode == 0
    assert _stamps(_normalised(there.stdout, "alice")) == _stamps(_normalised(here.stdout, "carol"))
    assert "second" in there.stdout and store.inbox("alice", unread_only=True) == []
    for agent in ("alice", "carol"):
        both.local("send", "--to", agent, "--subject", "third", "--from", "bob")
    here, there = both.local("check", "--agent", "carol"), both.remote("check", "--agent", "alice")
    assert _stamps(_normalised(there.stdout, "alice")) == _stamps(_normalised(here.stdout, "carol"))
    mid = both.local("send", "--to", "alice", "--subject", "ack me", "--from", "bob").stdout.strip()
    first = both.remote("ack", mid, "msg-unknown1")
    expected = "acked 1; already read or unknown: msg-unknown1\n"
    assert (first.returncode, first.stdout) == (0, expected)
    assert both.remote("ack", mid, "--json").stdout == json.dumps(
        {"ok": True, "acked": [], "skipped": [mid]}) + "\n"  # fmt: skip


def _hook(both: Both, agent: str, remote: bool, payload: dict[str, Any]) -> str:
    run = both.remote if remote else both.local
    done = run("hook", "user-prompt-submit", "--agent", agent, stdin=json.dumps(payload))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_hook_over_http_prints_what_the_local_hook_prints(
    both: Both, store: SqliteMailStore, db: Path
) -> None:
    for agent in ("alice", "carol"):
        both.local("send", "--to", agent, "--subject", "urgent thing", "--body", "do it",
                   "--from", "bob", "--priority", "urgent")  # fmt: skip
    payload = {"session_id": "sess-1", "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    here = _hook(both, "carol", False, payload)
    there = _hook(both, "alice", True, payload)
    assert "do it" in there and "PRIORITY" in there
    assert _stamps(_normalised(there, "alice")) == _stamps(_normalised(here, "carol"))
    alice = store.get_agent("alice")
    assert alice is not None and alice.turn_state == "busy" and alice.session_id == "sess-1"
    assert store.inbox("alice", unread_only=True) == []
    assert _hook(both, "alice", True, payload) == ""  # nothing left
    state = db.parent.parent / "state"
    wrong = {"AGENTMAIL_TOKEN": "amt_wrong", "XDG_STATE_HOME": str(state)}
    bad = both.remote("hook", "user-prompt-submit", "--agent", "alice", stdin=json.dumps(payload),
                      env=wrong)  # fmt: skip
    assert (bad.returncode, bad.stdout) == (0, "")  # a hook never breaks the session
    logged = (state / "agentmaild" / "hooks.log").read_text()
    assert "hook.failed" in logged and "AccessError: unknown token" in logged
    assert "amt_wrong" not in logged



def test_a_codex_hook_over_http_gets_additional_context_json(
    both: Both, store: SqliteMailStore
) -> None:
    mid = both.local("send", "--to", "alice", "--subject", "s", "--body", "for codex",
                     "--from", "bob").stdout.strip()  # fmt: skip
    done = both.remote("hook", "session-start", "--agent", "alice", "--vendor", "codex",
                       stdin='{"source": "startup"}')  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    assert mid in out["additionalContext"] and "for codex" in out["additionalContext"]
    assert store.inbox("alice", unread_only=True) == []


def test_a_gemini_hook_over_http_acks_only_after_the_turn(
    both: Both, store: SqliteMailStore
) -> None:
    mid = both.local("send", "--to", "alice", "--subject", "s", "--body", "for gemini",
                     "--from", "bob").stdout.strip()  # fmt: skip
    payload = json.dumps({"session_id": "g-1", "prompt": "go"})

    def hook(event: str) -> str:
        done = both.remote("hook", event, "--agent", "alice", "--vendor", "gemini", stdin=payload)
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = json.loads(hook("user-prompt-submit"))["hookSpecificOutput"]
    assert out["hookEventName"] == "BeforeAgent" and mid in out["additionalContext"]
    assert [m.id for m in store.inbox("alice", unread_only=True)] == [mid]  # the turn runs
    assert hook("stop") == ""  # AfterAgent: the model answered
    assert store.inbox("alice", unread_only=True) == []

HEAVY = {"typer", "click", "structlog", "asyncio", "anyio", "starlette", "uvicorn", "httpx",
         "sqlite3", "dataclasses", "agentmaild.models", "agentmaild.config"}  # fmt: skip


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(("check", "--inject", "--agent", "alice", "--json"), None),
     (("hook", "user-prompt-submit", "--agent", "alice"), '{"prompt": "go"}')],
)  # fmt: skip
def test_the_http_hot_paths_import_only_the_stdlib_client(
    both: Both, args: tuple[str, ...], stdin: str | None
) -> None:
    both.local("send", "--to", "alice", "--subject", "s", "--from", "bob")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentmaild", *args],
        env={**both.d.env, **both.remote_env, "AGENTMAIL_DB": "/nonexistent/mail.db"},
        capture_output=True, text=True, input=stdin, timeout=60,
    )  # fmt: skip
    modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines()
               if line.startswith("import time:")}  # fmt: skip
    assert "http.client" in modules and "agentmaild.http.client" in modules
    assert not {m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY}
    assert done.returncode == 0 and "[agentmail] 1 new message for alice" in done.stdout
