"""The ``agentmaild agents …`` commands: register, change, inspect and retire recipients."""

from __future__ import annotations

import shlex
import socket
from pathlib import Path
from typing import Annotated, Any

import typer

from agentmaild.cli import common as cli
from agentmaild.cli.common import DbOpt, JsonOpt, command, one_line, open_store, out
from agentmaild.errors import NotFound, UsageError, ValidationError
from agentmaild.ids import check_host, check_name
from agentmaild.jsoninput import JsonInputError, check_text, json_or_text
from agentmaild.models import Agent, ChannelKind
from agentmaild.rules import members, queues

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


def _acp(
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


def _agent_line(a: Agent) -> str:
    where = a.tmux_target or (shlex.join(a.command) if a.command else "")
    turn = f" turn={a.turn_state}" if a.turn_state else ""
    host = f" host={a.host}" if a.host else ""
    return f"{a.name:<20} {a.capability:<12} {a.state:<10} {a.channel:<6} {where}{turn}{host}"


def _host(given: str | None, db: str | None) -> str | None:
    """The agent's host: ``--host``, else this machine's on a store shared by hosts, else none
    (a store file has one daemon, which delivers to every agent)."""
    if given is not None:
        return check_host(given)
    if cli.db_location(db).shared_by_hosts:
        return socket.gethostname()
    return None


def _parse_settings(pairs: list[str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValidationError(f"--setting {pair!r}: expected KEY=VALUE")
        try:
            check_text(key)
            settings[key] = json_or_text(raw)
        except JsonInputError as exc:
            raise ValidationError(f"--setting {one_line(key)}: {exc.message}") from None
    return settings


def _check_channel(
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


def _command_argv(command: str | None) -> tuple[str, ...] | None:
    if command is None:
        return None
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        raise ValidationError(f"--command: {exc}") from exc
    if not argv:
        raise ValidationError("--command: empty")
    return argv


def _cwd(cwd: str | None) -> str | None:
    if cwd is None:
        return None
    path = Path(cwd).expanduser().resolve()
    if not path.is_dir():
        raise ValidationError(f"--cwd: {cwd} is not a directory")
    return str(path)


ChannelOpt = Annotated[
    str | None,
    typer.Option("--channel", help="pull spawn stdin acp codex-app opencode-server tmux."),
]
CommandOpt = Annotated[
    str | None,
    typer.Option(
        "--command",
        help="Agent argv, shell-quoted but never run by a shell. "
        "Placeholders: {agent} {session_id} {delivery_id}.",
    ),
]
CwdOpt = Annotated[str | None, typer.Option("--cwd", help="Working directory of the agent.")]
TargetOpt = Annotated[str | None, typer.Option("--tmux-target", help="SESSION:WINDOW.PANE")]
SocketOpt = Annotated[str | None, typer.Option("--tmux-socket", help="tmux server name (-L).")]
PresetOpt = Annotated[
    str | None,
    typer.Option("--preset", help="claude codex gemini opencode: the CLI's headless flags."),
]
PollOpt = Annotated[
    float | None, typer.Option("--poll-interval", min=0.05, help="Seconds (default: config).")
]
SettingOpt = Annotated[
    list[str] | None, typer.Option("--setting", help="KEY=VALUE channel setting (repeatable).")
]
QueueOpt = Annotated[
    list[str] | None,
    typer.Option("--queue", help="Join the work queue NAME (mail to queue:NAME; repeatable)."),
]


def register(agents_app: typer.Typer) -> None:  # noqa: C901 - one closure per command
    @agents_app.command("add")
    @command
    def add(
        name: Annotated[str, typer.Argument(help="[a-z0-9][a-z0-9._-]{0,63}")],
        capability: Annotated[
            str | None,
            typer.Option(
                "--capability",
                "-c",
                help="coordinator lead builder … or custom (Overstory mode: Overstory's, if it "
                "knows the agent).",
            ),
        ] = None,
        parent: Annotated[
            str | None, typer.Option("--parent", help="Who gets its interruption reports.")
        ] = None,
        channel: ChannelOpt = None,
        command_: CommandOpt = None,
        cwd: CwdOpt = None,
        tmux_target: TargetOpt = None,
        tmux_socket: SocketOpt = None,
        preset: PresetOpt = None,
        poll_interval: PollOpt = None,
        setting: SettingOpt = None,
        queue: QueueOpt = None,
        host: Annotated[
            str | None,
            typer.Option(
                "--host",
                help="The host whose daemon delivers to it (default on a PostgreSQL store: this "
                "machine's hostname; on a store file: any host).",
            ),
        ] = None,
        db: DbOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Register an agent and how mail reaches it."""
        loose = cli.overstory_mode_of(db)
        check_name(name, loose=loose)
        if capability is not None:
            check_name(capability, "capability")
        if parent is not None:
            check_name(parent, "parent", loose=loose)
        argv = _command_argv(command_)
        kind, argv, settings = _acp(channel or "pull", argv, preset, _parse_settings(setting or []))
        if channel in PROTOCOLS:
            preset = None  # the preset chose the ACP command; the spawn presets do not apply
        _check_channel(kind, argv, preset, tmux_target)
        agent = Agent(
            name=name,
            capability=capability or "",
            parent=parent,
            channel=kind,
            command=argv,
            cwd=_cwd(cwd),
            tmux_target=tmux_target,
            tmux_socket=tmux_socket,
            preset=preset,
            poll_interval_s=poll_interval,
            settings=settings,
            host=_host(host, db),
        )
        wanted = queues.names_to_join(queue or [], kind)
        with open_store(db) as store:
            if store.overstory is not None:  # one identity: what Overstory knows of it holds
                agent = store.overstory.adopt(agent)
            if not agent.capability:
                raise UsageError("agents add: --capability is required")
            stored = store.add_agent(agent)
            joined = queues.join(store, name, wanted)
            cli.poke(store, None)
        out(
            {"ok": True, "agent": stored.to_dict(), "queues": joined},
            as_json,
            lambda: typer.echo(f"added {name}"),
        )

    @agents_app.command("update")
    @command
    def update(
        name: str,
        capability: Annotated[str | None, typer.Option("--capability", "-c")] = None,
        parent: Annotated[str | None, typer.Option("--parent")] = None,
        channel: ChannelOpt = None,
        command_: CommandOpt = None,
        cwd: CwdOpt = None,
        tmux_target: TargetOpt = None,
        tmux_socket: SocketOpt = None,
        preset: PresetOpt = None,
        poll_interval: PollOpt = None,
        setting: SettingOpt = None,
        queue: QueueOpt = None,
        leave_queue: Annotated[
            list[str] | None, typer.Option("--leave-queue", help="Leave the work queue NAME.")
        ] = None,
        db: DbOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Change an agent's registration; a running daemon picks it up at once."""
        check_name(name, loose=cli.overstory_mode_of(db))
        changes: dict[str, Any] = {
            k: v
            for k, v in {
                "capability": capability and check_name(capability, "capability"),
                "parent": parent and check_name(parent, "parent"),
                "channel": channel,
                "command": _command_argv(command_),
                "cwd": _cwd(cwd),
                "tmux_target": tmux_target,
                "tmux_socket": tmux_socket,
                "preset": preset,
                "poll_interval_s": poll_interval,
            }.items()
            if v is not None
        }
        with open_store(db) as store:
            current = store.get_agent(name)
            if current is not None and setting:
                changes["settings"] = {**current.settings, **_parse_settings(setting)}
            if current is not None and channel in PROTOCOLS:
                base = changes.get("settings", current.settings)
                cmd = changes.get("command", current.command)
                _, argv, changes["settings"] = _acp(channel, cmd and tuple(cmd), preset, base)
                changes.update(channel="stdin", command=argv, preset=None)
            if current is not None:
                merged = {**current.to_dict(), **changes}
                cmd = merged["command"]
                _check_channel(
                    merged["channel"],
                    tuple(cmd) if cmd else None,
                    merged["preset"],
                    merged["tmux_target"],
                )
            agent = store.update_agent(name, changes)
            queues.join(store, name, queues.names_to_join(queue or [], agent.channel))
            for left in leave_queue or []:
                store.leave_queue(queues.queue_name(left), name)
            cli.poke(store, None)
        out({"ok": True, "agent": agent.to_dict()}, as_json, lambda: typer.echo(f"updated {name}"))

    @agents_app.command("list")
    @command
    def list_agents(db: DbOpt = None, as_json: JsonOpt = False) -> None:
        """List registered agents."""
        with open_store(db, readonly=True) as store:
            found = store.list_agents()
        out(
            {"ok": True, "agents": [a.to_dict() for a in found]},
            as_json,
            lambda: typer.echo("\n".join(_agent_line(a) for a in found) or "no agents registered"),
        )

    @agents_app.command("show")
    @command
    def show(name: str, db: DbOpt = None, as_json: JsonOpt = False) -> None:
        """Show one agent's registration."""
        check_name(name, loose=cli.overstory_mode_of(db))
        with open_store(db, readonly=True) as store:
            agent = store.get_agent(name)
        if agent is None:
            raise NotFound(f"no agent named {name!r}")
        out(
            {"ok": True, "agent": agent.to_dict()},
            as_json,
            lambda: typer.echo("\n".join(f"{k}: {v}" for k, v in agent.to_dict().items())),
        )

    @agents_app.command("set-state")
    @command
    def set_state(
        name: str,
        state: Annotated[str, typer.Argument(help=" ".join(members.WORDS))],
        force: Annotated[bool, typer.Option("--force", help="Skip the transition table.")] = False,
        db: DbOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Move an agent to a state or member status (guarded by the transition tables).

        States: booting working idle stalled completed zombie. Member statuses: ready busy
        shutdown_requested shutdown error (stored as a state; see README "Team rules").
        """
        check_name(name, loose=cli.overstory_mode_of(db))
        with open_store(db) as store:
            agent = members.set_status(store, name, state, force=force)
        out(
            {"ok": True, "agent": agent.to_dict(), "member_status": agent.member_status},
            as_json,
            lambda: typer.echo(f"{name}: {agent.state} (member: {agent.member_status})"),
        )

    @agents_app.command("remove")
    @command
    def remove(name: str, db: DbOpt = None, as_json: JsonOpt = False) -> None:
        """Unregister an agent (its mail stays in the store)."""
        check_name(name, loose=cli.overstory_mode_of(db))
        with open_store(db) as store:
            store.remove_agent(name)
            cli.poke(store, None)
        out({"ok": True, "removed": name}, as_json, lambda: typer.echo(f"removed {name}"))
