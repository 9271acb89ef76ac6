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
