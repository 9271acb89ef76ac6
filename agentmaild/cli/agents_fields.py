"""What ``agentmaild agents add|update`` make of their options: channel, command, settings, host.

Loaded by the commands when they run, not when the CLI starts (``--help`` stays light).
"""

from __future__ import annotations

import json
import shlex
import shutil
import socket
from pathlib import Path
from typing import Any

from agentmaild.cli import plain as cli
from agentmaild.errors import UsageError, ValidationError
from agentmaild.ids import check_host, check_name
from agentmaild.mail.jsoninput import key_values
from agentmaild.models import Agent, ChannelKind

CHANNELS = tuple(c.value for c in ChannelKind)
PRESETS = ("claude", "codex", "gemini", "opencode")  # channels.vendors.PRESETS + claude
VENDOR_CHANNELS = ("spawn",)  # where the codex/gemini/opencode presets work today
# --channel acp|codex-app|opencode-server are stored as channel stdin + settings.protocol (no
# schema CHECK change); with a --preset (or, for the vendor's own server, none) and no --command
# each runs the vendor's long-lived mode.
ACP = "acp"
PROTOCOLS: dict[str, dict[str | None, tuple[str, ...]]] = {
    ACP: {"gemini": ("gemini", "--acp", "--skip-trust"), "opencode": ("opencode", "acp")},
    "codex-app": {None: ("codex", "app-server"), "codex": ("codex", "app-server")},
    "opencode-server": {None: ("opencode", "serve"), "opencode": ("opencode", "serve")},
}


def acp(
    channel: str, argv: tuple[str, ...] | None, preset: str | None, settings: dict[str, Any]
) -> tuple[str, tuple[str, ...] | None, dict[str, Any]]:
    """``--channel acp``, ``codex-app`` or ``opencode-server`` made storable: (channel, argv,
    settings)."""
    commands = PROTOCOLS.get(channel)
    if commands is None:
        return channel, argv, settings
    named = [p for p in commands if p is not None]
    if preset is not None and preset not in commands:
        raise ValidationError(f"--channel {channel}: --preset one of {', '.join(named)}")
    if argv is None:
        argv = commands.get(preset)
    if not argv:
        raise UsageError(f"channel {channel} needs --command (e.g. 'gemini --acp') or --preset")
    return "stdin", argv, {**settings, "protocol": channel}


def agent_line(a: Agent) -> str:
    where = a.tmux_target or (shlex.join(a.command) if a.command else "")
    turn = f" turn={a.turn_state}" if a.turn_state else ""
    host = f" host={a.host}" if a.host else ""
    return f"{a.name:<20} {a.capability:<12} {a.state:<10} {a.channel:<7} {where}{turn}{host}"


# ``agents list``'s header, over ``agent_line``'s columns
AGENT_HEADER = f"{'NAME':<20} {'CAPABILITY':<12} {'STATE':<10} {'CHANNEL':<7} COMMAND OR PANE"


def field_lines(fields: dict[str, Any]) -> list[str]:
    """``agents show``: ``key: value`` lines; nothing set is ``-``, never Python's ``None``."""
    lines = []
    for key, value in fields.items():
        if value is None or value == "" or value == [] or value == {}:
            shown = "-"
        elif isinstance(value, list):
            shown = shlex.join(str(v) for v in value)
        elif isinstance(value, dict):
            shown = json.dumps(value, ensure_ascii=False)
        else:
            shown = str(value)
        lines.append(f"{key}: {shown}")
    return lines


def host_of(given: str | None, db: str | None) -> str | None:
    """The agent's host: ``--host``, else this machine's on a store shared by hosts, else none
    (a store file has one daemon, which delivers to every agent)."""
    if given is not None:
        return check_host(given)
    if cli.db_location(db).shared_by_hosts:
        return socket.gethostname()
    return None


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    return key_values(pairs, "--setting")


def check_channel(
    channel: str, command: tuple[str, ...] | None, preset: str | None, tmux_target: str | None
) -> None:
    if channel not in CHANNELS:
        raise ValidationError(f"--channel: unknown {channel!r}; one of {', '.join(CHANNELS)}")
    if preset is not None and preset not in PRESETS:
        raise ValidationError(f"--preset: unknown {preset!r}; one of {', '.join(PRESETS)}")
    if preset not in (None, "claude") and channel not in VENDOR_CHANNELS:
        raise ValidationError(f"--preset {preset} works with --channel spawn, not {channel}")
    if channel in ("spawn", "stdin") and not command and preset is None:
        raise UsageError(f"channel {channel} needs --command (or a --preset)")
    if channel == "tmux" and not tmux_target:
        raise UsageError("channel tmux needs --tmux-target SESSION:WINDOW.PANE")


def command_argv(command: str | None) -> tuple[str, ...] | None:
    if command is None:
        return None
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        raise ValidationError(f"--command: {exc}") from exc
    if not argv:
        raise ValidationError("--command: empty")
    return argv


def cwd_of(cwd: str | None) -> str | None:
    if cwd is None:
        return None
    path = Path(cwd).expanduser().resolve()
    if not path.is_dir():
        raise ValidationError(f"--cwd: {cwd} is not a directory")
    return str(path)


def new_agent(name: str, db: str | None, *, capability: str | None, parent: str | None,
              channel: str | None, command: str | None, cwd: str | None, tmux_target: str | None,
              tmux_socket: str | None, preset: str | None, poll_interval: float | None,
              setting: list[str] | None, host: str | None) -> Agent:  # fmt: skip
    """``agents add``'s options checked and made one ``Agent`` (its capability may still be
    empty: Overstory may know it)."""
    loose = cli.overstory_mode_of(db)
    check_name(name, loose=loose)
    if capability is not None:
        check_name(capability, "capability")
    if parent is not None:
        check_name(parent, "parent", loose=loose)
    kind, argv, settings = acp(
        channel or "pull", command_argv(command), preset, parse_settings(setting or [])
    )
    if channel in PROTOCOLS:
        preset = None  # the preset chose the ACP command; the spawn presets do not apply
    check_channel(kind, argv, preset, tmux_target)
    return Agent(
        name=name,
        capability=capability or "",
        parent=parent,
        channel=kind,
        command=argv,
        cwd=cwd_of(cwd),
        tmux_target=tmux_target,
        tmux_socket=tmux_socket,
        preset=preset,
        poll_interval_s=poll_interval,
        settings=settings,
        host=host_of(host, db),
    )


def mid_turn_setting(setting: list[str] | None, policy: str | None) -> list[str] | None:
    """``--mid-turn-priority P`` as the setting it is stored as (``mid_turn_priority``)."""
    if policy is None:
        return setting
    from agentmaild.store.midturn import POLICIES

    if policy not in POLICIES:
        raise UsageError(f"--mid-turn-priority: unknown {policy!r}; one of {', '.join(POLICIES)}")
    return [*(setting or []), f"mid_turn_priority={policy}"]


def merge_changes(
    current: Agent | None, changes: dict[str, Any], setting: list[str] | None, preset: str | None
) -> None:
    """``agents update``'s changes completed against the stored agent (settings merged, an ACP
    channel made storable) and checked as a whole; nothing to do for an unknown agent."""
    if current is None:
        return
    channel = changes.get("channel")
    if setting:
        changes["settings"] = {**current.settings, **parse_settings(setting)}
    if channel in PROTOCOLS:
        base = changes.get("settings", current.settings)
        cmd = changes.get("command", current.command)
        _, argv, changes["settings"] = acp(channel, cmd and tuple(cmd), preset, base)
        changes.update(channel="stdin", command=argv, preset=None)
    merged = {**current.to_dict(), **changes}
    cmd = merged["command"]
    check_channel(
        merged["channel"], tuple(cmd) if cmd else None, merged["preset"], merged["tmux_target"]
    )


# preset → (the executable it runs, how to install it)
_INSTALLS = {
    "claude": ("claude", "npm install -g @anthropic-ai/claude-code (in a checkout: make claude)"),
    "codex": ("codex", "npm install -g @openai/codex (in a checkout: make vendors)"),
    "gemini": ("gemini", "npm install -g @google/gemini-cli (in a checkout: make vendors)"),
    "opencode": ("opencode", "npm install -g opencode-ai (in a checkout: make vendors)"),
}


def missing_executable(agent: Agent) -> str | None:
    """A warning when the agent's preset runs an executable this PATH does not have (the
    daemon's PATH is likely the same): the agent is still registered, but nothing can start."""
    if agent.preset not in _INSTALLS:
        return None
    exe, hint = _INSTALLS[agent.preset]
    exe = agent.command[0] if agent.command else exe
    if shutil.which(exe) is not None:
        return None
    return (f"--preset {agent.preset}: no {exe!r} executable on PATH, so the daemon cannot start "
            f"{agent.name} until there is one (the daemon's PATH must have it). "
            f"Install it: {hint}")  # fmt: skip
