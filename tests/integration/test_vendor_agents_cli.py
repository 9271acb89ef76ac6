"""Registering codex/gemini/opencode agents: the presets are offered on the spawn channel only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProc


@pytest.mark.parametrize("preset", ["codex", "gemini", "opencode"])
def test_vendor_presets_register_on_spawn_and_are_refused_elsewhere(
    tmp_path: Path, preset: str
) -> None:
    cli = DaemonProc(tmp_path / "mail.db", tmp_path, text=True).cli
    added = cli("agents", "add", "a1", "-c", "builder", "--channel", "spawn", "--preset", preset,
                "--json")  # fmt: skip
    assert added.returncode == 0, added.stderr
    agent = json.loads(added.stdout)["agent"]
    assert agent["preset"] == preset and agent["command"] is None

    refused = cli("agents", "add", "a2", "-c", "builder", "--channel", "stdin", "--preset", preset,
                  "--command", preset, "--json")  # fmt: skip
    assert refused.returncode != 0
    error = json.loads(refused.stdout or refused.stderr)
    assert f"--preset {preset} works with --channel spawn" in json.dumps(error)
    assert "Traceback" not in refused.stderr
