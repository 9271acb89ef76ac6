"""``hook EVENT --vendor V`` output shapes and ``hooks install|uninstall --vendor`` merging, with a
real SQLite store and the real CLI as a child process (the real vendor CLIs: tests/e2e)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmaild.hooks import vendors
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore

EXE = "/opt/x/bin/agentmaild"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "store" / "mail.db"
    path.parent.mkdir()
    store = SqliteMailStore(path)
    store.add_agent(Agent(name="bob", capability="builder"))
    store.add_agent(Agent(name="alice", capability="lead"))
    Mailer(store).send(sender="alice", to="bob", subject="hi", body="BODY-1")
    store.close()
    return path


def _run(args: list[str], home: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL", "CODEX", "XDG"))}
    env.update(HOME=str(home), PATH="/usr/bin:/bin", XDG_STATE_HOME=str(home / "state"))
    return subprocess.run(
        [sys.executable, "-m", "agentmaild", *args],
        input=stdin, capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("vendor", "event", "name"),
    [
        ("codex", "user-prompt-submit", "UserPromptSubmit"),
        ("codex", "session-start", "SessionStart"),
        ("gemini", "user-prompt-submit", "BeforeAgent"),
        ("gemini", "session-start", "SessionStart"),
    ],
)
def test_codex_and_gemini_get_additional_context_json_once(
    db: Path, tmp_path: Path, vendor: str, event: str, name: str
) -> None:
    payload = json.dumps({"session_id": "s-1", "prompt": "go on"})
    argv = ["hook", event, "--agent", "bob", "--db", str(db), "--vendor", vendor]
    done = _run(argv, tmp_path, payload)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == name
    assert "BODY-1" in out["hookSpecificOutput"]["additionalContext"]
    if vendor == "gemini":  # acked by AfterAgent only (see test_gemini_acks_after_the_turn)
        stop = ["hook", "stop", "--agent", "bob", "--db", str(db), "--vendor", vendor]
        assert _run(stop, tmp_path, payload).returncode == 0
    assert _run(argv, tmp_path, payload).stdout == ""  # acked: never twice


def _unread(db: Path) -> list[str]:
    store = SqliteMailStore(db, readonly=True)
    try:
        return [m.body for m in store.inbox("bob") if not m.read]
    finally:
        store.close()


def test_gemini_acks_after_the_turn_and_prints_a_failed_turns_mail_again(
    db: Path, tmp_path: Path
) -> None:
    """Gemini CLI keeps no trace of a turn whose model call failed (measured: tests/e2e): its
    mail stays unread until AfterAgent, and a prompt after a failed turn gets it again."""

    def hook(event: str, session: str = "s-1") -> str:
        argv = ["hook", event, "--agent", "bob", "--db", str(db), "--vendor", "gemini"]
        done = _run(argv, tmp_path, json.dumps({"session_id": session, "prompt": "go"}))
        assert done.returncode == 0, done.stderr
        if not done.stdout:
            return ""
        return str(json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"])

    assert "BODY-1" in hook("session-start")
    assert hook("user-prompt-submit") == ""  # SessionStart's mail is in this turn's context
    assert _unread(db) == ["BODY-1"]  # printed, not acked: the turn has not answered yet
    # That turn failed (no AfterAgent): the next prompt prints it again, and the new mail.
    store = SqliteMailStore(db)
    Mailer(store).send(sender="alice", to="bob", subject="hi", body="BODY-2")
    store.close()
    again = hook("user-prompt-submit")
    assert "BODY-1" in again and "BODY-2" in again
    assert hook("stop") == ""  # AfterAgent: the model answered; both acked
    assert _unread(db) == []
    assert hook("user-prompt-submit") == ""
    # A resumed session (a new process: SessionStart again) after a failed first turn.
    store = SqliteMailStore(db)
    Mailer(store).send(sender="alice", to="bob", subject="hi", body="BODY-3")
    store.close()
    assert "BODY-3" in hook("session-start", "s-2")
    assert "BODY-3" in hook("session-start", "s-2")  # the first start's turn never answered
    assert hook("user-prompt-submit", "s-2") == ""
    assert hook("stop", "s-2") == "" and _unread(db) == []


@pytest.mark.parametrize("vendor", ["codex", "gemini", "opencode"])
def test_vendor_hooks_keep_the_banner_and_the_cap(db: Path, tmp_path: Path, vendor: str) -> None:
    store = SqliteMailStore(db)
    mailer = Mailer(store)
    for n in (2, 3):  # with BODY-1: three mails, ~12,000 characters
        mailer.send(sender="alice", to="bob", subject=f"big {n}", body=f"BODY-{n} " + "x" * 6000)
    mailer.send(sender="alice", to="bob", subject="now", body="URGENT-BODY", priority="urgent")
    store.close()
    argv = ["hook", "user-prompt-submit", "--agent", "bob", "--db", str(db), "--vendor", vendor]
    payload = json.dumps({"session_id": "s-1", "prompt": "go"})
    seen: list[str] = []
    for _ in range(4):  # bounded: three would do
        done = _run(argv, tmp_path, payload)
        assert done.returncode == 0, done.stderr
        if not done.stdout:
            break
        assert len(done.stdout) <= 10_000  # the cap holds for the vendor's shape too
        seen.append(done.stdout)
        if vendor == "gemini":  # its ack waits for AfterAgent
            stop = ["hook", "stop", "--agent", "bob", "--db", str(db), "--vendor", vendor]
            assert _run(stop, tmp_path, payload).returncode == 0
    assert len(seen) >= 2  # ~12,000 characters do not fit one hook's output
    text = seen[0] if vendor == "opencode" else json.loads(seen[0])["hookSpecificOutput"][
        "additionalContext"]  # fmt: skip
    assert text.startswith("PRIORITY") and "URGENT-BODY" in text  # the banner, urgent first
    assert [sum(f"BODY-{n}" in out for out in seen) for n in (1, 2, 3)] == [1, 1, 1]  # once each


def test_opencode_gets_plain_text(db: Path, tmp_path: Path) -> None:
    argv = ["hook", "user-prompt-submit", "--agent", "bob", "--db", str(db), "--vendor", "opencode"]
    done = _run(argv, tmp_path, json.dumps({"session_id": "ses_1", "prompt": "hi"}))
    assert "BODY-1" in done.stdout
    assert done.stdout.startswith("[agentmail] ")  # the text itself, as Claude's hook prints it


def _hooks_of(path: Path) -> dict[str, Any]:
    hooks: dict[str, Any] = json.loads(path.read_text())["hooks"]
    return hooks


@pytest.mark.parametrize("vendor", ["codex", "gemini"])
def test_install_merges_is_idempotent_and_uninstall_keeps_the_users(
    tmp_path: Path, vendor: str
) -> None:
    path = tmp_path / f".{vendor}" / ("hooks.json" if vendor == "codex" else "settings.json")
    path.parent.mkdir()
    mine = {"hooks": [{"type": "command", "command": "echo mine"}]}
    event = "UserPromptSubmit" if vendor == "codex" else "BeforeAgent"
    path.write_text(json.dumps({"other": 1, "hooks": {event: [mine]}}))
    first = vendors.install(vendor, tmp_path, "bob", None, EXE)
    text = path.read_text()
    assert first["changed"] and first["path"] == str(path)
    again = vendors.install(vendor, tmp_path, "bob", None, EXE)
    assert not again["changed"] and path.read_text() == text
    hooks = _hooks_of(path)
    assert hooks[event][0] == mine  # the user's stays first: its trust key keeps its index
    commands = [h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]]
    assert f"{EXE} hook user-prompt-submit --agent bob --vendor {vendor}" in commands
    assert len(commands) == len(vendors.SPECS[vendor]) + 1
    removed = vendors.uninstall(vendor, tmp_path, EXE)
    assert removed["removed"] == len(vendors.SPECS[vendor])
    assert json.loads(path.read_text()) == {"other": 1, "hooks": {event: [mine]}}


def test_opencode_plugin_carries_its_settings_and_uninstall_keeps_others(tmp_path: Path) -> None:
    plugins = tmp_path / ".opencode" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "mine.js").write_text("export const Mine = async () => ({});\n")
    first = vendors.install("opencode", tmp_path, "bob", tmp_path / "m.db", EXE)
    path = Path(first["path"])
    text = path.read_text()
    assert first["changed"] and path.parent == plugins
    assert (
        f'const SETTINGS = {{"exe": "{EXE}", "agent": "bob", "db": "{tmp_path / "m.db"}"}};' in text
    )
    assert not vendors.install("opencode", tmp_path, "bob", tmp_path / "m.db", EXE)["changed"]
    assert vendors.uninstall("opencode", tmp_path, EXE)["removed"] == 1
    assert sorted(p.name for p in plugins.iterdir()) == ["mine.js"]


def test_a_foreign_file_under_our_plugin_name_is_refused(tmp_path: Path) -> None:
    plugins = tmp_path / ".opencode" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / vendors.PLUGIN_NAME).write_text("// someone else's\n")
    done = _run(["hooks", "install", "--vendor", "opencode", "--agent", "bob", "--exe", EXE,
                 "--dir", str(tmp_path)], tmp_path)  # fmt: skip
    assert done.returncode != 0
    assert "not agentmaild's plugin" in done.stderr and "Traceback" not in done.stderr
    assert (plugins / vendors.PLUGIN_NAME).read_text() == "// someone else's\n"


def test_codex_without_a_codex_executable_installs_and_says_how_to_trust(tmp_path: Path) -> None:
    args = ["hooks", "install", "--vendor", "codex", "--agent", "bob", "--exe", EXE, "--json"]
    done = _run(args, tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["trusted"] is False and "--dangerously-bypass-hook-trust" in result["trust_error"]
    assert Path(result["path"]) == tmp_path / ".codex" / "hooks.json"


def test_an_unknown_vendor_is_one_line(tmp_path: Path) -> None:
    done = _run(["hooks", "install", "--vendor", "cursor", "--agent", "bob"], tmp_path)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: unknown vendor 'cursor'; one of: claude, codex, gemini, opencode"
    ]
