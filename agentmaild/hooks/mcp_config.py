"""Registers ``agentmaild mcp`` (the server named ``agentmail``) in each vendor's MCP config, beside
the hooks ``hooks install`` writes, and removes only that entry on uninstall:

- Claude Code: ``<dir>/.mcp.json`` ``mcpServers.agentmail`` (project scope), approved in
  ``.claude/settings.local.json`` ``enabledMcpjsonServers`` so it starts without a prompt;
- Codex: ``[mcp_servers.agentmail]`` in ``config.toml`` beside its ``hooks.json``, its tools
  approved (``default_tools_approval_mode``: a headless ``codex exec`` refuses a call that needs
  approval; no other server gains it);
- Gemini CLI: ``mcpServers.agentmail`` in its ``settings.json`` (``trust``: its calls need no
  confirmation; no other server gains it);
- OpenCode: ``mcp.agentmail`` (``"type": "local"``) in ``opencode.json`` (``<dir>/opencode.json``,
  else ``$XDG_CONFIG_HOME/opencode/opencode.json``).

Installing twice changes nothing; every other entry stays as it was.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentmaild.hooks import install as base
from agentmaild.hooks.vendors import config_path

SERVER = "agentmail"
_TOML_HEAD = f"[mcp_servers.{SERVER}]"


def server_argv(exe: str, agent: str, db: Path | None) -> list[str]:
    return [exe, "mcp", "--agent", agent, *(["--db", str(db)] if db else [])]


def mcp_path(vendor: str, directory: Path | None) -> Path:
    if vendor == "claude":
        return (directory or Path.cwd()) / ".mcp.json"
    if vendor == "codex":
        return config_path("codex", directory).parent / "config.toml"
    if vendor == "gemini":
        return config_path("gemini", directory)
    if directory is not None:
        return directory / "opencode.json"
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "opencode" / "opencode.json"


def _entry(vendor: str, argv: list[str]) -> tuple[str, dict[str, Any]]:
    """(the key holding servers, our server's entry) in ``vendor``'s JSON config."""
    if vendor == "opencode":
        return "mcp", {"type": "local", "command": argv, "enabled": True}
    entry: dict[str, Any] = {"command": argv[0], "args": argv[1:]}
    if vendor == "claude":
        entry = {"type": "stdio", **entry}
    if vendor == "gemini":
        entry["trust"] = True
    return "mcpServers", entry


def install(vendor: str, directory: Path | None, agent: str, db: Path | None, exe: str) -> bool:
    """Register the server; True when a file changed."""
    path = mcp_path(vendor, directory)
    argv = server_argv(exe, agent, db)
    if vendor == "codex":
        return _toml_install(path, argv)
    key, entry = _entry(vendor, argv)
    settings, before = base._load_settings(path)
    servers = settings.setdefault(key, {})
    if not isinstance(servers, dict):
        raise base._settings_error(path, f'"{key}" is not an object')
    servers[SERVER] = entry
    changed = base._save_settings(path, settings, before)
    if vendor == "claude":
        changed = _approve(directory or Path.cwd(), True) or changed
    return changed


def uninstall(vendor: str, directory: Path | None) -> bool:
    """Remove our server's entry (a file left empty goes); True when a file changed."""
    path = mcp_path(vendor, directory)
    if vendor == "codex":
        return _toml_uninstall(path)
    changed = vendor == "claude" and _approve(directory or Path.cwd(), False)
    if not path.exists():
        return changed
    key = _entry(vendor, [""])[0]
    settings, before = base._load_settings(path)
    servers = settings.get(key)
    if not isinstance(servers, dict) or SERVER not in servers:
        return changed
    del servers[SERVER]
    if not servers:
        del settings[key]
    if not settings:
        path.unlink()
        return True
    return base._save_settings(path, settings, before) or changed


def _approve(project: Path, on: bool) -> bool:
    """Claude Code starts a project's ``.mcp.json`` server once approved: ours is listed in
    ``enabledMcpjsonServers`` (nothing else is approved)."""
    path = base.settings_path(project)
    settings, before = base._load_settings(path)
    names = settings.get("enabledMcpjsonServers", [])
    if not isinstance(names, list):
        raise base._settings_error(path, '"enabledMcpjsonServers" is not a list')
    kept = [n for n in names if n != SERVER] + ([SERVER] if on else [])
    if kept == names:
        return False
    if kept:
        settings["enabledMcpjsonServers"] = kept
    else:
        settings.pop("enabledMcpjsonServers", None)
    if not settings:
        return base._remove_settings(path)
    return base._save_settings(path, settings, before)


# -- Codex: a TOML table, written as text (the stdlib reads TOML but does not write it) ----------
def _toml_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _without_ours(text: str) -> str:
    """``text`` with our table (its header to the next header) taken out."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        head = line.strip()
        if head.startswith("["):
            skipping = head == _TOML_HEAD or head.startswith(f"[mcp_servers.{SERVER}.")
        if not skipping:
            out.append(line)
    return "".join(out).rstrip("\n") + ("\n" if out else "")


def _with_ours(text: str, table: str) -> str:
    """``text`` with our table put where it was (so a second install changes nothing, whatever
    was written after it since), else appended after a blank line."""
    out: list[str] = []
    blanks: list[str] = []
    skipping = placed = False
    for line in text.splitlines(keepends=True):
        head = line.strip()
        if head.startswith("["):
            skipping = head == _TOML_HEAD or head.startswith(f"[mcp_servers.{SERVER}.")
            out += blanks  # the blank lines that ended our table still part what follows
            blanks = []
            if skipping and not placed:
                out.append(table)
                placed = True
        if not skipping:
            out.append(line)
        elif not head:
            blanks.append(line)
    if placed:
        return "".join(out)
    rest = "".join(out).rstrip("\n")
    return (rest + "\n\n" if rest.strip() else "") + table


def _toml_install(path: Path, argv: list[str]) -> bool:
    import json
    import tomllib

    before = _toml_text(path)
    try:
        tomllib.loads(before)
    except tomllib.TOMLDecodeError as exc:
        raise base._settings_error(path, f"not valid TOML ({exc})") from exc
    table = (f"{_TOML_HEAD}\ncommand = {json.dumps(argv[0])}\n"
             f"args = [{', '.join(json.dumps(a) for a in argv[1:])}]\n"
             'default_tools_approval_mode = "approve"\n')  # fmt: skip
    text = _with_ours(before, table)
    tomllib.loads(text)  # what we write must read back
    return base.write_text(path, before, text)


def _toml_uninstall(path: Path) -> bool:
    before = _toml_text(path)
    if _TOML_HEAD not in before:
        return False
    text = _without_ours(before)
    if not text.strip():
        path.unlink()
        return True
    return base.write_text(path, before, text)
