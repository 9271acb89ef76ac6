"""Installs agentmaild's hooks for Codex, Gemini CLI and OpenCode (Claude Code's: ``install``).

Each vendor gets the hook config it reads, merged with what is there (installing twice changes
nothing; uninstalling removes only ours):

- Codex: ``hooks.json`` (``$CODEX_HOME``, default ``~/.codex``; ``<dir>/.codex`` with ``--dir``):
  SessionStart and UserPromptSubmit deliver mail as ``hookSpecificOutput.additionalContext``,
  PostToolUse mid-turn mail (``hooks.midturn``), Stop records idle. Codex runs a hook only once
  its hash is trusted: see ``codex_trust``.
- Gemini CLI: ``settings.json`` (``~/.gemini``; ``<dir>/.gemini``): SessionStart and BeforeAgent
  deliver, AfterTool mid-turn mail (held to AfterAgent: ``deferred``), AfterAgent acks and records
  idle, SessionEnd gone. Timeouts are in milliseconds there.
- OpenCode: the plugin ``opencode_plugin.js`` shipped in this package, written as
  ``agentmaild.js`` into ``$XDG_CONFIG_HOME/opencode/plugins`` (``<dir>/.opencode/plugins``) with
  the agent, store and executable filled in: ``chat.message`` appends the mail to the user's
  message, ``tool.execute.after`` mid-turn mail to the tool's output, ``session.idle`` records
  idle.

The hook commands are ``agentmaild hook EVENT --agent NAME --vendor V``: the same handler as
Claude's (cap, banner, acks, turn state), printing the vendor's output shape.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentmaild.hooks import install as base

VENDORS = ("claude", "codex", "gemini", "opencode")
# vendor -> (the vendor's event name, our CLI spelling)
SPECS: dict[str, tuple[tuple[str, str], ...]] = {
    "codex": (
        ("SessionStart", "session-start"),
        ("UserPromptSubmit", "user-prompt-submit"),
        ("PostToolUse", "post-tool-use"),
        ("Stop", "stop"),
    ),
    "gemini": (
        ("SessionStart", "session-start"),
        ("BeforeAgent", "user-prompt-submit"),
        ("AfterTool", "post-tool-use"),
        ("AfterAgent", "stop"),
        ("SessionEnd", "session-end"),
    ),
}
TIMEOUT = {"codex": base.HOOK_TIMEOUT_S, "gemini": base.HOOK_TIMEOUT_S * 1000}  # s, ms
PLUGIN_NAME = "agentmaild.js"
PLUGIN_MARK = "// agentmaild: OpenCode plugin"
_SETTINGS_SLOT = "/*agentmaild-settings*/ {}"


def config_path(vendor: str, directory: Path | None) -> Path:
    """Where ``vendor`` reads the hooks we install (user-wide unless ``directory`` is given)."""
    home = Path.home()
    if vendor == "codex":
        if directory is not None:
            return directory / ".codex" / "hooks.json"
        codex_home = os.environ.get("CODEX_HOME")
        return (Path(codex_home) if codex_home else home / ".codex") / "hooks.json"
    if vendor == "gemini":
        return (directory if directory is not None else home) / ".gemini" / "settings.json"
    if vendor == "opencode":
        if directory is not None:
            return directory / ".opencode" / "plugins" / PLUGIN_NAME
        xdg = os.environ.get("XDG_CONFIG_HOME")
        return (Path(xdg) if xdg else home / ".config") / "opencode" / "plugins" / PLUGIN_NAME
    raise ValueError(vendor)


def install(
    vendor: str, directory: Path | None, agent: str, db: Path | None, exe: str
) -> dict[str, Any]:
    from agentmaild.ids import check_name

    check_name(agent)
    path = config_path(vendor, directory)
    if vendor == "opencode":
        return _install_plugin(path, agent, db, exe)
    settings, before = base._load_settings(path)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise base._settings_error(path, '"hooks" is not an object')
    for event, _ in SPECS[vendor]:
        if not isinstance(hooks.get(event, []), list):
            raise base._settings_error(path, f'"hooks.{event}" is not a list')
    emptied = base._strip_ours(hooks, exe)
    for event, spelled in SPECS[vendor]:
        command = base.hook_command(exe, spelled, agent, db) + f" --vendor {vendor}"
        entry: dict[str, Any] = {"type": "command", "command": command}
        if vendor == "gemini":
            entry["name"] = f"agentmaild-{spelled}"
        entry["timeout"] = TIMEOUT[vendor]
        hooks.setdefault(event, []).append({"hooks": [entry]})
    for event in emptied:
        if not hooks.get(event):
            hooks.pop(event, None)
    changed = base._save_settings(path, settings, before)
    events = [e for e, _ in SPECS[vendor]]
    return {"ok": True, "vendor": vendor, "path": str(path), "agent": agent, "changed": changed,
            "events": events}  # fmt: skip


def uninstall(vendor: str, directory: Path | None, exe: str) -> dict[str, Any]:
    path = config_path(vendor, directory)
    if vendor == "opencode":
        return _uninstall_plugin(path)
    if not path.exists():
        return {"ok": True, "vendor": vendor, "path": str(path), "removed": 0, "changed": False}
    settings, before = base._load_settings(path)
    hooks = settings.get("hooks")
    removed = 0
    if isinstance(hooks, dict):
        removed = base._count_ours(hooks, exe)
        for event in base._strip_ours(hooks, exe):
            if hooks.get(event) == []:
                del hooks[event]
        if removed and not hooks:
            del settings["hooks"]
    changed = bool(removed) and base._save_settings(path, settings, before)
    return {"ok": True, "vendor": vendor, "path": str(path), "removed": removed, "changed": changed}


# -- OpenCode: one plugin file ----------------------------------------------------------------
def plugin_source(agent: str, db: Path | None, exe: str) -> str:
    """The shipped plugin with this install's settings in its one settings slot."""
    shipped = (Path(__file__).parent / "opencode_plugin.js").read_text(encoding="utf-8")
    settings = {"exe": exe, "agent": agent, "db": str(db) if db else None}
    return shipped.replace(_SETTINGS_SLOT, json.dumps(settings, ensure_ascii=False), 1)


def _install_plugin(path: Path, agent: str, db: Path | None, exe: str) -> dict[str, Any]:
    text = plugin_source(agent, db, exe)
    try:
        before: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        before = None
    except (OSError, UnicodeDecodeError) as exc:
        raise base._settings_error(path, f"cannot read it ({exc})") from exc
    if before is not None and PLUGIN_MARK not in before:
        raise base._settings_error(path, "it is not agentmaild's plugin")
    changed = base.write_text(path, before, text)
    events = ["chat.message", "tool.execute.after", "event"]
    return {"ok": True, "vendor": "opencode", "path": str(path), "agent": agent,
            "changed": changed, "events": events}  # fmt: skip


def _uninstall_plugin(path: Path) -> dict[str, Any]:
    removed = 0
    try:
        ours = PLUGIN_MARK in path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        ours = False
    if ours:
        path.unlink()
        removed = 1
    return {"ok": True, "vendor": "opencode", "path": str(path), "removed": removed,
            "changed": bool(removed)}  # fmt: skip
