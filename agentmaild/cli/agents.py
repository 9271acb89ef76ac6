"""The ``agentmaild agents …`` commands: register, change, inspect and retire recipients.

What ``add`` and ``update`` make of their options is ``agents_fields``, loaded when they run.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentmaild.cli import agents_ops
from agentmaild.cli import common as cli
from agentmaild.cli.common import DbOpt, JsonOpt, command, one_line, open_store, out
from agentmaild.cli.costs import BudgetOpt, budget, with_budget
from agentmaild.errors import NotFound, UsageError
from agentmaild.ids import check_name
from agentmaild.rules import members, queues

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

CapabilityOpt = Annotated[
    str | None,
    typer.Option(
        "--capability",
        "-c",
        help="coordinator lead builder … or custom (Overstory mode: Overstory's, if it "
        "knows the agent).",
    ),
]
ParentOpt = Annotated[
    str | None, typer.Option("--parent", help="Who gets its interruption reports.")
]
MidTurnOpt = Annotated[
    str | None,
    typer.Option(
        "--mid-turn-priority",
        help="high urgent all none: which mail goes into a running turn, between tool calls "
        "(default: [delivery] mid_turn_priority).",
    ),
]
HostOpt = Annotated[
    str | None,
    typer.Option(
        "--host",
        help="The host whose daemon delivers to it (default on a PostgreSQL store: this "
        "machine's hostname; on a store file: any host).",
    ),
]


@command
def add(
    name: Annotated[str, typer.Argument(help="[a-z0-9][a-z0-9._-]{0,63}")],
    capability: CapabilityOpt = None,
    parent: ParentOpt = None,
    channel: ChannelOpt = None,
    command_: CommandOpt = None,
    cwd: CwdOpt = None,
    tmux_target: TargetOpt = None,
    tmux_socket: SocketOpt = None,
    preset: PresetOpt = None,
    poll_interval: PollOpt = None,
    setting: SettingOpt = None,
    queue: QueueOpt = None,
    host: HostOpt = None,
    budget_usd: BudgetOpt = None,
    mid_turn_priority: MidTurnOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Register an agent and how mail reaches it."""
    from agentmaild.cli.agents_fields import mid_turn_setting, missing_executable, new_agent

    setting = mid_turn_setting(setting, mid_turn_priority)

    agent = new_agent(
        name, db, capability=capability, parent=parent, channel=channel, command=command_,
        cwd=cwd, tmux_target=tmux_target, tmux_socket=tmux_socket, preset=preset,
        poll_interval=poll_interval, setting=with_budget(setting, budget_usd), host=host,
    )  # fmt: skip
    wanted = queues.names_to_join(queue or [], agent.channel)
    with open_store(db) as store:
        if store.overstory is not None:  # one identity: what Overstory knows of it holds
            agent = store.overstory.adopt(agent)
        if not agent.capability:
            raise UsageError("agents add: --capability is required")
        stored = store.add_agent(agent)
        joined = queues.join(store, name, wanted)
        cli.poke(store, None)
    warning = missing_executable(stored)
    if warning is not None:
        typer.echo(f"warning: {one_line(warning)}", err=True)
    out(
        {"ok": True, "agent": stored.to_dict(), "queues": joined},
        as_json,
        lambda: typer.echo(f"added {name}"),
    )


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
    budget_usd: BudgetOpt = None,
    mid_turn_priority: MidTurnOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Change an agent's registration; a running daemon picks it up at once."""
    from agentmaild.cli.agents_fields import command_argv, cwd_of, merge_changes, mid_turn_setting

    setting = mid_turn_setting(setting, mid_turn_priority)

    check_name(name, loose=cli.overstory_mode_of(db))
    changes: dict[str, Any] = {
        k: v
        for k, v in {
            "capability": capability and check_name(capability, "capability"),
            "parent": parent and check_name(parent, "parent"),
            "channel": channel,
            "command": command_argv(command_),
            "cwd": cwd_of(cwd),
            "tmux_target": tmux_target,
            "tmux_socket": tmux_socket,
            "preset": preset,
            "poll_interval_s": poll_interval,
        }.items()
        if v is not None
    }
    with open_store(db) as store:
        merge_changes(store.get_agent(name), changes, with_budget(setting, budget_usd), preset)
        agent = store.update_agent(name, changes)
        queues.join(store, name, queues.names_to_join(queue or [], agent.channel))
        for left in leave_queue or []:
            store.leave_queue(queues.queue_name(left), name)
        cli.poke(store, None)
    out({"ok": True, "agent": agent.to_dict()}, as_json, lambda: typer.echo(f"updated {name}"))


@command
def list_agents(db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """List registered agents."""
    agents_ops.list_agents(db, as_json)


@command
def show(name: str, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Show one agent's registration."""
    check_name(name, loose=cli.overstory_mode_of(db))
    with open_store(db, readonly=True) as store:
        agent = store.get_agent(name)
    if agent is None:
        raise NotFound(f"no agent named {name!r}")
    from agentmaild.cli.agents_fields import field_lines

    out({"ok": True, "agent": agent.to_dict()}, as_json,
        lambda: typer.echo("\n".join(field_lines(agent.to_dict()))))  # fmt: skip


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
    shutdown_requested shutdown error (stored as a state; see docs/guides/team-rules.md).
    """
    check_name(name, loose=cli.overstory_mode_of(db))
    with open_store(db) as store:
        agent = members.set_status(store, name, state, force=force)
    out(
        {"ok": True, "agent": agent.to_dict(), "member_status": agent.member_status},
        as_json,
        lambda: typer.echo(f"{name}: {agent.state} (member: {agent.member_status})"),
    )


@command
def remove(name: str, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Unregister an agent (its mail stays in the store)."""
    check_name(name, loose=cli.overstory_mode_of(db))
    with open_store(db) as store:
        store.remove_agent(name)
        cli.poke(store, None)
    out({"ok": True, "removed": name}, as_json, lambda: typer.echo(f"removed {name}"))


def register(app: typer.Typer) -> None:
    """The ``agentmaild agents`` group and its commands, in the order ``--help`` lists them."""
    agents_app = typer.Typer(help="Register and manage agents (recipients).", no_args_is_help=True)
    app.add_typer(agents_app, name="agents")
    for name, fn in (("add", add), ("update", update), ("list", list_agents), ("show", show),
                     ("set-state", set_state), ("budget", budget), ("remove", remove)):  # fmt: skip
        agents_app.command(name)(fn)
