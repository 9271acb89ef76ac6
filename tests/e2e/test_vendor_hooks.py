"""``hooks install --vendor codex|gemini|opencode`` with the REAL CLIs against loopback stand-ins.

In a throw-away HOME holding one hook (or plugin) of the user's own: install agentmaild's hooks
(Codex's trust saved through its app-server), run a headless turn: the model request carries the
unread mail's id and the mail is acked; the next turn resumes that session (its request carries
the first mail) and does not get it again (it gets the mail sent since); a turn whose model call
fails (HTTP 500/429/400) does not lose its mail: the retried turn in the session carries it.
Installing twice changes nothing; uninstalling leaves the user's hook exactly where it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentmaild.hooks import vendors
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.loopback_api import RecordedRequest
from tests.support.vendor_env import VENDORS, vendor_binary
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(420)]  # four OpenCode turns: 130 s, loaded

AGENTMAILD = str(Path(sys.executable).parent / "agentmaild")
TURN_TIMEOUT_S = 120.0
REPLY = "ok from the stand-in"
USER_MARK = "users-own-hook"
# After a headless turn: Codex's Stop and OpenCode's session.idle say idle; Gemini CLI's
# SessionEnd (fired as `gemini -p` exits) says gone.
END_STATE = {"codex": "idle", "gemini": "gone", "opencode": "idle"}
# OpenCode retries 5xx/429 without end (its turn would never fail): a 400 fails it at once.
HOOK_ERROR_STATUS = {"codex": 500, "gemini": 429, "opencode": 400}


def _user_hook(vendor: str, home: Path) -> Path:
    """The user's own hook or plugin, there before ours; returns the file holding it."""
    if vendor == "opencode":
        path = home / ".config" / "opencode" / "plugins" / "mine.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"// {USER_MARK}\nexport const Mine = async () => ({{}});\n")
        return path
    path = _config(vendor, home)
    settings = json.loads(path.read_text()) if path.exists() else {}
    event = "Stop" if vendor == "codex" else "AfterAgent"
    entry = {"type": "command", "command": f"true {USER_MARK}", "timeout": 5}
    if vendor == "gemini":
        entry["name"] = USER_MARK
        entry["timeout"] = 5000
    settings["hooks"] = {event: [{"hooks": [entry]}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))
    return path


def _config(vendor: str, home: Path) -> Path:
    if vendor == "codex":
        return home / ".codex" / "hooks.json"
    if vendor == "gemini":
        return home / ".gemini" / "settings.json"
    return home / ".config" / "opencode" / "plugins" / vendors.PLUGIN_NAME


def _inbox(db: Path) -> list[tuple[str, bool]]:
    store = SqliteMailStore(db, readonly=True)
    try:
        return [(m.id, m.read) for m in store.inbox("alice")]
    finally:
        store.close()


def _agent(db: Path) -> tuple[str | None, str | None]:
    store = SqliteMailStore(db, readonly=True)
    try:
        agent = store.get_agent("alice")
        assert agent is not None
        return agent.turn_state, agent.session_id
    finally:
        store.close()


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTMAILD, *args], env=env, capture_output=True, text=True, timeout=90, check=False
    )


def _turn(
    vendor: str, binary: str, env: dict[str, str], cwd: Path, prompt: str,
    session: str | None = None, *, ok: bool = True,
) -> str | None:  # fmt: skip
    """One headless turn (resuming ``session`` when given); the session id it printed."""
    stdin = ""
    if vendor == "codex":
        resume = ["resume"] if session else []
        argv = [binary, "exec", *resume, "--json", "--skip-git-repo-check",
                *([session] if session else []), prompt]  # fmt: skip
    elif vendor == "gemini":
        resume = ["--resume", session] if session else []
        argv = [binary, "-p", prompt, "--output-format", "stream-json", "--skip-trust", *resume]
    else:
        argv = [binary, "run", "--format", "json", *(["--session", session] if session else [])]
        stdin = prompt
    done = subprocess.run(
        argv, env=env, cwd=cwd, input=stdin, capture_output=True, text=True,
        timeout=TURN_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert (done.returncode == 0) is ok, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    for line in done.stdout.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        for key in ("thread_id", "session_id", "sessionID"):  # codex, gemini, opencode
            if isinstance(event.get(key), str):
                return str(event[key])
    return None


def _new_texts(request: RecordedRequest, before: RecordedRequest) -> str:
    """The texts of ``request`` that ``before`` (an earlier call in its session) did not have."""
    return "\n".join(text for role, text in request.texts if (role, text) not in before.texts)


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_hooks_deliver_unread_mail_once_and_uninstall_keeps_the_users(
    vendor: str, tmp_path: Path
) -> None:
    spec = VENDORS[vendor]
    binary = vendor_binary(vendor)
    project = tmp_path / "proj"
    project.mkdir()
    db = tmp_path / "store" / "mail.db"
    with spec.api(REPLY) as api:
        home, env = spec.setup(tmp_path, api)
        user_file = _user_hook(vendor, home)
        user_before = user_file.read_text()
        admin = {**env, "PATH": f"{Path(binary).parent}{os.pathsep}{env.get('PATH', '')}"}
        for name, capability in (("alice", "builder"), ("bob", "lead")):
            added = _cli(admin, "--db", str(db), "agents", "add", name, "-c", capability)
            assert added.returncode == 0, added.stderr

        install = ["hooks", "install", "--vendor", vendor, "--agent", "alice", "--db", str(db)]
        first = _cli(admin, *install, "--json")
        assert first.returncode == 0, first.stderr
        result = json.loads(first.stdout)
        assert result["changed"] is True
        if vendor == "codex":
            assert result["trusted"] is True, result
        ours = Path(result["path"])
        installed = ours.read_text()
        config_toml = home / ".codex" / "config.toml"
        trust_before = config_toml.read_text() if vendor == "codex" else ""
        again = json.loads(_cli(admin, *install, "--json").stdout)
        assert again["changed"] is False
        assert ours.read_text() == installed  # installing twice: the very same file
        if vendor == "codex":
            assert again["newly_trusted"] == 0
            assert config_toml.read_text() == trust_before

        def send(body: str) -> str:
            sent = _cli(
                admin, "--db", str(db), "send", "--from", "bob", "--to", "alice", "-s", "plan",
                "--body", body, "--json",
            )  # fmt: skip
            assert sent.returncode == 0, sent.stderr
            (sent_id,) = json.loads(sent.stdout)["ids"]
            return str(sent_id)

        msg_id = send("build the parser MAILBODY-1")

        session = _turn(vendor, binary, env, project, "first turn PROMPT-1")
        request = api.wait_for("PROMPT-1", timeout=30)
        assert msg_id in request.all_text(), request.texts
        assert "MAILBODY-1" in request.all_text()
        assert session is not None
        assert _inbox(db) == [(msg_id, True)]  # acked
        # the session id from the hook's input; OpenCode runs its stop hook on ``session.idle``,
        # which can land a moment after ``opencode run`` has printed its last event and exited
        wait_for(lambda: _agent(db) == (END_STATE[vendor], session), 20,
                 f"{vendor}'s end-of-turn state")  # fmt: skip

        # The next turn resumes the session (the first turn's answer is in its history); the
        # first mail is not sent again.
        later_id = send("then the lexer MAILBODY-2")
        assert _turn(vendor, binary, env, project, "second turn PROMPT-2", session) == session
        second = api.wait_for("PROMPT-2", timeout=30)
        assert REPLY in second.all_text()  # the same session
        # Gemini CLI 0.61 resumes without the user message a hook added context to (prompt and
        # mail both; the answer stays: convertSessionToClientHistory skips a user message that
        # starts with <hook_context>): the model saw the mail on its own turn only.
        assert ("MAILBODY-1" in second.all_text()) is (vendor != "gemini")
        fresh = _new_texts(second, request)
        assert msg_id not in fresh  # delivered once only
        assert later_id in fresh  # while later mail still arrives

        # The model API fails the turn that got mail. Codex and OpenCode keep the failed turn's
        # message in the session (the retry's history carries it), so the hook acked it at
        # print, as Claude's does; Gemini CLI drops that turn, so its mail stays unread until
        # a turn is answered (hooks.deferred) and the retry's prompt gets it again.
        failed_id = send("then the tests MAILBODY-3")
        api.fail_next(1, status=HOOK_ERROR_STATUS[vendor])
        _turn(vendor, binary, env, project, "failing turn PROMPT-3", session, ok=False)
        assert api.wait_for("PROMPT-3", timeout=30).answered_with == HOOK_ERROR_STATUS[vendor]
        assert dict(_inbox(db))[failed_id] is (vendor != "gemini")
        api.clear_failures()
        _turn(vendor, binary, env, project, "retried turn PROMPT-4", session)
        retried = api.wait_for("PROMPT-4", timeout=30)
        assert failed_id in retried.all_text() and "MAILBODY-3" in retried.all_text()
        assert all(read for _, read in _inbox(db))

        removed = _cli(admin, "hooks", "uninstall", "--vendor", vendor, "--json")
        assert removed.returncode == 0, removed.stderr
        assert json.loads(removed.stdout)["removed"] >= 1
    if vendor == "opencode":
        assert not ours.exists()
        assert user_file.read_text() == user_before
    else:
        assert json.loads(user_file.read_text()) == json.loads(user_before)
