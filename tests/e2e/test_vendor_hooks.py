"""``hooks install --vendor codex|gemini|opencode`` with the REAL CLIs against loopback stand-ins.

In a throw-away HOME holding one hook (or plugin) of the user's own: install agentmaild's hooks
(Codex's trust saved through its app-server), run a headless turn: the model request carries the
unread mail's id and the mail is acked; a second turn does not get it again (it gets the mail
sent since). Installing twice
changes nothing; uninstalling leaves the user's hook exactly where it was.
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
from tests.support.vendor_env import VENDORS, vendor_binary

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(240)]

AGENTMAILD = str(Path(sys.executable).parent / "agentmaild")
TURN_TIMEOUT_S = 120.0
USER_MARK = "users-own-hook"
# After a headless turn: Codex's Stop and OpenCode's session.idle say idle; Gemini CLI's
# SessionEnd (fired as `gemini -p` exits) says gone.
END_STATE = {"codex": "idle", "gemini": "gone", "opencode": "idle"}


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


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTMAILD, *args], env=env, capture_output=True, text=True, timeout=90, check=False
    )


def _turn(vendor: str, binary: str, env: dict[str, str], cwd: Path, prompt: str) -> str:
    if vendor == "codex":
        argv = [binary, "exec", "--json", "--skip-git-repo-check", prompt]
        stdin = ""
    elif vendor == "gemini":
        argv = [binary, "-p", prompt, "--output-format", "stream-json", "--skip-trust"]
        stdin = ""
    else:
        argv = [binary, "run", "--format", "json"]
        stdin = prompt
    done = subprocess.run(
        argv, env=env, cwd=cwd, input=stdin, capture_output=True, text=True,
        timeout=TURN_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_hooks_deliver_unread_mail_once_and_uninstall_keeps_the_users(
    vendor: str, tmp_path: Path
) -> None:
    spec = VENDORS[vendor]
    binary = vendor_binary(vendor)
    project = tmp_path / "proj"
    project.mkdir()
    db = tmp_path / "store" / "mail.db"
    with spec.api("ok from the stand-in") as api:
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

        _turn(vendor, binary, env, project, "first turn PROMPT-1")
        request = api.wait_for("PROMPT-1", timeout=30)
        assert msg_id in request.all_text(), request.texts
        assert "MAILBODY-1" in request.all_text()
        store = SqliteMailStore(db, readonly=True)
        try:
            assert [(m.id, m.read) for m in store.inbox("alice")] == [(msg_id, True)]  # acked
            agent = store.get_agent("alice")
            assert agent is not None and agent.turn_state == END_STATE[vendor]
            assert agent.session_id  # the vendor's session id, from the hook's input
        finally:
            store.close()

        later_id = send("then the lexer MAILBODY-2")
        _turn(vendor, binary, env, project, "second turn PROMPT-2")
        second = api.wait_for("PROMPT-2", timeout=30)
        assert msg_id not in second.all_text()  # delivered once only
        assert later_id in second.all_text()  # while later mail still arrives

        removed = _cli(admin, "hooks", "uninstall", "--vendor", vendor, "--json")
        assert removed.returncode == 0, removed.stderr
        assert json.loads(removed.stdout)["removed"] >= 1
    if vendor == "opencode":
        assert not ours.exists()
        assert user_file.read_text() == user_before
    else:
        assert json.loads(user_file.read_text()) == json.loads(user_before)
