"""``hooks install|uninstall --vendor V`` also registers ``agentmaild mcp`` in the vendor's MCP
config (the real CLI as a child process, real files): the user's other entries kept, installing
twice changes nothing, uninstall takes out only ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

EXE = "/opt/x/bin/agentmaild"
ARGS = ["mcp", "--agent", "bob"]


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL", "CODEX", "XDG"))}
    env.update(HOME=str(home), PATH="/usr/bin:/bin", XDG_STATE_HOME=str(home / "state"))
    return subprocess.run([sys.executable, "-m", "agentmaild", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)  # fmt: skip


def _ours(vendor: str, path: Path) -> Any:
    if vendor == "codex":
        return tomllib.loads(path.read_text()).get("mcp_servers", {}).get("agentmail")
    key = "mcp" if vendor == "opencode" else "mcpServers"
    return json.loads(path.read_text()).get(key, {}).get("agentmail")


THEIRS: dict[str, tuple[str, str]] = {
    "claude": (".mcp.json", '{"mcpServers": {"other": {"command": "x"}}, "keep": 1}'),
    "codex": (".codex/config.toml", 'model = "m"\n\n[mcp_servers.other]\ncommand = "x"\n'),
    "gemini": (".gemini/settings.json", '{"mcpServers": {"other": {"command": "x"}}}'),
    "opencode": ("opencode.json", '{"mcp": {"other": {"type": "local", "command": ["x"]}}}'),
}
WANT: dict[str, Any] = {
    "claude": {"type": "stdio", "command": EXE, "args": ARGS},
    "codex": {"command": EXE, "args": ARGS, "default_tools_approval_mode": "approve"},
    "gemini": {"command": EXE, "args": ARGS, "trust": True},
    "opencode": {"type": "local", "command": [EXE, *ARGS], "enabled": True},
}


@pytest.mark.parametrize("vendor", sorted(THEIRS))
def test_install_registers_the_server_beside_the_users_own(tmp_path: Path, vendor: str) -> None:
    project = tmp_path / "project"
    name, theirs = THEIRS[vendor]
    path = project / name
    path.parent.mkdir(parents=True)
    path.write_text(theirs)
    argv = ["hooks", "install", "--vendor", vendor, "--agent", "bob", "--dir", str(project),
            "--exe", EXE, "--json"]  # fmt: skip
    done = _run(tmp_path, *argv)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mcp"] == {"path": str(path), "changed": True}
    assert _ours(vendor, path) == WANT[vendor]
    after = path.read_text()
    again = _run(tmp_path, *argv)
    assert json.loads(again.stdout)["mcp"]["changed"] is False and path.read_text() == after
    if vendor == "claude":
        settings = json.loads((project / ".claude" / "settings.local.json").read_text())
        assert settings["enabledMcpjsonServers"] == ["agentmail"]
    gone = _run(tmp_path, "hooks", "uninstall", "--vendor", vendor, "--dir", str(project),
                "--exe", EXE, "--json")  # fmt: skip
    assert gone.returncode == 0 and json.loads(gone.stdout)["mcp"]["removed"] == 1
    assert _ours(vendor, path) is None
    if vendor == "codex":
        assert tomllib.loads(path.read_text()) == tomllib.loads(theirs)
    else:
        assert json.loads(path.read_text()) == json.loads(theirs)
    if vendor == "claude":
        assert not (project / ".claude" / "settings.local.json").exists()


@pytest.mark.parametrize("vendor", sorted(THEIRS))
def test_a_file_that_held_only_ours_goes_with_it(tmp_path: Path, vendor: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    base = ["--vendor", vendor, "--dir", str(project), "--exe", EXE]
    assert _run(tmp_path, "hooks", "install", "--agent", "bob", *base).returncode == 0
    path = project / THEIRS[vendor][0]
    assert _ours(vendor, path) == WANT[vendor]
    assert _run(tmp_path, "hooks", "uninstall", *base).returncode == 0
    assert not path.exists()


def test_a_broken_config_is_left_unchanged_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text("[broken\n")
    done = _run(tmp_path, "hooks", "install", "--vendor", "codex", "--agent", "bob", "--dir",
                str(tmp_path), "--exe", EXE)  # fmt: skip
    assert done.returncode == 1 and path.read_text() == "[broken\n"
    assert done.stderr.startswith("error: ") and "not valid TOML" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_codex_table_written_after_ours_does_not_make_a_second_install_change(
    tmp_path: Path,
) -> None:
    """Codex's project trust is written after our server's table; installing again keeps our
    table where it is, so the file is the very same (it used to move ours to the end)."""
    path = tmp_path / ".codex" / "config.toml"
    install = ["hooks", "install", "--vendor", "codex", "--agent", "bob", "--dir", str(tmp_path),
               "--exe", EXE, "--json"]  # fmt: skip
    first = _run(tmp_path, *install)
    assert first.returncode == 0, first.stderr
    path.write_text(path.read_text() + '\n[projects."/w"]\ntrust_level = "trusted"\n')
    written = path.read_text()
    again = _run(tmp_path, *install)
    assert again.returncode == 0, again.stderr
    assert path.read_text() == written
    assert _ours("codex", path) is not None
    assert tomllib.loads(written)["projects"]["/w"]["trust_level"] == "trusted"
