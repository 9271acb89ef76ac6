"""``agents add|update --channel acp``: stored as stdin + settings.protocol "acp"; bad input is
one clear error."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.daemon import DaemonProc


def test_acp_channel_registers_from_preset_or_command_and_refuses_bad_input(
    tmp_path: Path,
) -> None:
    cli = DaemonProc(tmp_path / "mail.db", tmp_path, text=True).cli
    for name, extra, argv in [
        ("g", ["--preset", "gemini"], ["gemini", "--acp", "--skip-trust"]),
        ("o", ["--preset", "opencode"], ["opencode", "acp"]),
        ("c", ["--command", "my-agent --acp"], ["my-agent", "--acp"]),
    ]:
        added = cli("agents", "add", name, "-c", "builder", "--channel", "acp", *extra, "--json")
        assert added.returncode == 0, added.stderr
        agent = json.loads(added.stdout)["agent"]
        assert (agent["channel"], agent["command"], agent["preset"]) == ("stdin", argv, None)
        assert agent["settings"] == {"protocol": "acp"}

    for extra, says in [([], "channel acp needs --command"), (["--preset", "codex"], "--preset")]:
        refused = cli("agents", "add", "x", "-c", "builder", "--channel", "acp", *extra, "--json")
        assert refused.returncode != 0
        assert says in json.loads(refused.stdout or refused.stderr)["error"]["message"]
        assert "Traceback" not in refused.stderr

    assert cli("agents", "add", "p", "-c", "builder", "--channel", "stdin", "--command", "cat")
    moved = cli("agents", "update", "p", "--channel", "acp", "--json")
    assert moved.returncode == 0, moved.stderr
    agent = json.loads(moved.stdout)["agent"]
    assert agent["channel"] == "stdin" and agent["settings"]["protocol"] == "acp"


def test_codex_app_and_opencode_server_channels_register_with_their_default_commands(
    tmp_path: Path,
) -> None:
    cli = DaemonProc(tmp_path / "mail.db", tmp_path, text=True).cli
    for name, extra, argv, protocol in [
        ("cx", ["--channel", "codex-app"], ["codex", "app-server"], "codex-app"),
        ("cp", ["--channel", "codex-app", "--preset", "codex"], ["codex", "app-server"],
         "codex-app"),
        ("cc", ["--channel", "codex-app", "--command", "codex app-server -c a=b"],
         ["codex", "app-server", "-c", "a=b"], "codex-app"),
        ("os", ["--channel", "opencode-server"], ["opencode", "serve"], "opencode-server"),
    ]:  # fmt: skip
        added = cli("agents", "add", name, "-c", "builder", *extra, "--json")
        assert added.returncode == 0, added.stderr
        agent = json.loads(added.stdout)["agent"]
        assert (agent["channel"], agent["command"], agent["preset"]) == ("stdin", argv, None)
        assert agent["settings"] == {"protocol": protocol}

    url = ["--setting", "url=http://127.0.0.1:4096"]
    added = cli("agents", "add", "oa", "-c", "builder", "--channel", "opencode-server", *url)
    assert added.returncode == 0, added.stderr
    refused = cli("agents", "add", "x", "-c", "builder", "--channel", "codex-app", "--preset",
                  "gemini", "--json")  # fmt: skip
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "--preset one of codex" in json.loads(refused.stdout)["error"]["message"]
