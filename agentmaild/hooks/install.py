"""Installs agentmaild's hooks into ``.claude/settings.local.json`` and removes only ours.

The user's own hooks and settings are kept; installing twice gives the same file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# -- installing into .claude/settings.local.json -----------------------------------------------
# (Claude's event name, our CLI spelling, matcher or None for events without one)
HOOK_SPECS: tuple[tuple[str, str, str | None], ...] = (
    ("SessionStart", "session-start", None),
    ("UserPromptSubmit", "user-prompt-submit", None),
    ("PreToolUse", "pre-tool-use", "Bash|mcp__agentmail__.*"),  # poll guard; subagents' mail
    ("PostToolUse", "post-tool-use", "*"),
    ("Stop", "stop", None),
    ("PermissionRequest", "permission-request", "*"),
    ("Notification", "notification", None),
    ("SessionEnd", "session-end", None),
)
HOOK_TIMEOUT_S = 15  # Claude's per-hook timeout; the store's busy_timeout is 5 s
SETTINGS_FILE = "settings.local.json"


def settings_path(settings_dir: Path) -> Path:
    return settings_dir / ".claude" / SETTINGS_FILE


def hook_command(exe: str, event: str, agent: str, db: Path | None) -> str:
    import shlex

    argv = [exe, "hook", event, "--agent", agent, *(["--db", str(db)] if db else [])]
    return " ".join(shlex.quote(a) for a in argv)


def is_our_command(command: object, exe: str) -> bool:
    """Ours: starts with our executable + `` hook ``, or runs some ``agentmaild hook`` (moved)."""
    import shlex

    if not isinstance(command, str):
        return False
    if command.startswith(shlex.quote(exe) + " hook "):
        return True
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if argv[1:3] == ["-m", "agentmaild"]:
        argv = argv[2:]
    return len(argv) > 1 and os.path.basename(argv[0]) == "agentmaild" and argv[1] == "hook"


def install_hooks(settings_dir: Path, agent: str, db: Path | None, exe: str) -> dict[str, Any]:
    """Merge our hooks into ``<dir>/.claude/settings.local.json``; the user's stay as they were."""
    from agentmaild.ids import check_name

    check_name(agent)
    path = settings_path(settings_dir)
    settings, before = _load_settings(path)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise _settings_error(path, '"hooks" is not an object')
    for event, _, _ in HOOK_SPECS:
        if not isinstance(hooks.get(event, []), list):
            raise _settings_error(path, f'"hooks.{event}" is not a list')
    emptied = _strip_ours(hooks, exe)
    for event, spelled, matcher in HOOK_SPECS:
        entry = {
            "type": "command",
            "command": hook_command(exe, spelled, agent, db),
            "timeout": HOOK_TIMEOUT_S,
        }
        group: dict[str, Any] = {"matcher": matcher} if matcher is not None else {}
        hooks.setdefault(event, []).append({**group, "hooks": [entry]})
    for event in emptied:
        if not hooks.get(event):
            hooks.pop(event, None)  # an event of ours that a newer version no longer installs
    changed = _save_settings(path, settings, before)
    return {
        "ok": True,
        "path": str(path),
        "agent": agent,
        "changed": changed,
        "events": [e for e, _, _ in HOOK_SPECS],
    }


def uninstall_hooks(settings_dir: Path, exe: str = "agentmaild") -> dict[str, Any]:
    """Remove our hooks (and containers that held only ours) from the settings file."""
    path = settings_path(settings_dir)
    if not path.exists():
        return {"ok": True, "path": str(path), "removed": 0, "changed": False}
    settings, before = _load_settings(path)
    hooks = settings.get("hooks")
    removed = 0
    if isinstance(hooks, dict):
        removed = _count_ours(hooks, exe)
        for event in _strip_ours(hooks, exe):
            if hooks.get(event) == []:
                del hooks[event]
        if removed and not hooks:
            del settings["hooks"]
    changed = False
    if removed:
        changed = _save_settings(path, settings, before) if settings else _remove_settings(path)
    return {"ok": True, "path": str(path), "removed": removed, "changed": changed}


def _count_ours(hooks: dict[str, Any], exe: str) -> int:
    return sum(
        is_our_command(h.get("command"), exe)
        for groups in hooks.values()
        if isinstance(groups, list)
        for g in groups
        if isinstance(g, dict) and isinstance(g.get("hooks"), list)
        for h in g["hooks"]
        if isinstance(h, dict)
    )


def _strip_ours(hooks: dict[str, Any], exe: str) -> list[str]:
    """Drop our entries and the groups they leave empty; returns events whose lists changed."""
    changed: list[str] = []
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue  # not ours to judge: left exactly as it is
        kept = [_strip_group(g, exe) for g in groups]
        if kept != groups:
            hooks[event] = [g for g in kept if g is not None]
            changed.append(event)
    return changed


def _strip_group(group: Any, exe: str) -> Any:
    """The group without our hooks; None when only ours were in it."""
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return group
    entries = [
        h
        for h in group["hooks"]
        if not (isinstance(h, dict) and is_our_command(h.get("command"), exe))
    ]
    if len(entries) == len(group["hooks"]):
        return group
    return {**group, "hooks": entries} if entries else None


def _settings_error(path: Path, what: str) -> Exception:
    from agentmaild.errors import ConfigError

    return ConfigError(f"{path}: {what}; fix or remove it (it was left unchanged)")


def _load_settings(path: Path) -> tuple[dict[str, Any], str | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as exc:
        raise _settings_error(path, f"cannot read it ({exc})") from exc
    try:
        settings = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise _settings_error(path, f"not valid JSON ({exc})") from exc
    if not isinstance(settings, dict):
        raise _settings_error(path, "the top level is not a JSON object")
    return settings, text


def _save_settings(path: Path, settings: dict[str, Any], before: str | None) -> bool:
    text = json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
    if text == before:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if before is not None else 0o644
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _remove_settings(path: Path) -> bool:
    """Nothing but our hooks was in the file: remove it, and ``.claude`` if that leaves it empty."""
    path.unlink()
    try:
        path.parent.rmdir()
    except OSError:
        pass  # other files live there
    return True


def write_text(path: Path, before: str | None, text: str) -> bool:
    """Write ``text`` to ``path`` atomically (a temporary file renamed over it) unless it is
    ``before`` already; True when the file changed."""
    if text == before:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return True
