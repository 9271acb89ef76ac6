"""The ``agentmaild hooks install|uninstall`` and ``agentmaild hook EVENT`` commands (typer side).

``hook EVENT`` normally never gets here: ``entry.main`` routes it straight to ``hooks.run_hook``
without importing typer. This command exists for ``--help`` and for spellings the router leaves
to typer (``agentmaild --db X hook stop``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from agentmaild.cli.common import STATE, DbOpt, JsonOpt, command, out
from agentmaild.errors import ValidationError
from agentmaild.hooks import install as hooks_install
from agentmaild.hooks import run as hooks

DirOpt = Annotated[
    Path | None,
    typer.Option(
        "--dir",
        help="Project directory holding .claude/ (default: the current one); for the other "
        "vendors the project's .codex/, .gemini/ or .opencode/ instead of the user-wide config.",
    ),
]
VendorOpt = Annotated[
    str,
    typer.Option("--vendor", help="claude (default), codex, gemini or opencode."),
]
ExeOpt = Annotated[
    str | None,
    typer.Option("--exe", help="agentmaild executable the hooks run (default: this install's)."),
]


def default_exe() -> str:
    """This installation's console script, as an absolute path (hooks run without our PATH)."""
    beside = Path(sys.executable).parent / "agentmaild"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("agentmaild")
    if found:
        return str(Path(found).absolute())
    raise ValidationError("cannot find the agentmaild executable; pass --exe PATH")


def _warn_if_unknown(agent: str, db: str | None, project: Path) -> None:
    """One warning line on stderr when the store does not know ``agent`` (installing goes on:
    the agent may well be registered after its hooks)."""
    from agentmaild.errors import AgentmaildError
    from agentmaild.mail.mailer import IMPLICIT_RECIPIENTS
    from agentmaild.store.kinds import open_store
    from agentmaild.store.location import resolve_location

    if agent in IMPLICIT_RECIPIENTS:
        return
    location = resolve_location(db, start=str(project))
    problem = None
    try:
        store = open_store(location, readonly=True)
    except AgentmaildError:
        problem = f"no readable store at {location.shown} yet"
    else:
        try:
            if store.get_agent(agent) is None:
                problem = f"it is not registered in {location.shown}"
        finally:
            store.close()
    if problem:
        typer.echo(
            f"warning: agent {agent!r} is unknown ({problem}); register it with "
            f"`agentmaild agents add {agent} --capability …`",
            err=True,
        )


@command
def install(
    agent: Annotated[str, typer.Option("--agent", help="The agent this session is.")],
    directory: DirOpt = None,
    db: DbOpt = None,
    exe: ExeOpt = None,
    vendor: VendorOpt = "claude",
    codex: Annotated[
        str | None,
        typer.Option("--codex", help="codex executable that saves the hooks' trust."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge agentmaild's hooks into the vendor's config, keeping the user's own.

    Claude: .claude/settings.local.json.
    Codex: ~/.codex/hooks.json, trusted through `codex app-server` (PATH or --codex).
    Gemini CLI: ~/.gemini/settings.json.
    OpenCode: a plugin in ~/.config/opencode/plugins/.

    Idempotent. The store is pinned only when --db (or the global --db) is given;
    otherwise the hook finds it the usual way from the session's directory.
    """
    store = db or STATE.db
    project = (directory or Path.cwd()).absolute()
    if vendor != "claude":
        from agentmaild.cli.hooks_vendor import install_vendor

        install_vendor(vendor, directory, agent, store, exe or default_exe(), codex, as_json)
        _warn_if_unknown(agent, store, project)
        return
    from agentmaild.cli.hooks_vendor import register_mcp

    project = (directory or Path.cwd()).absolute()
    pinned = Path(store).expanduser().absolute() if store else None
    result = hooks_install.install_hooks(project, agent, pinned, exe or default_exe())
    result["mcp"] = register_mcp("claude", project, agent, pinned, exe or default_exe())
    result["changed"] = result["changed"] or result["mcp"]["changed"]
    _warn_if_unknown(agent, store, project)
    verb = "installed" if result["changed"] else "already installed"

    def human() -> None:
        typer.echo(f"{verb}: agentmaild hooks for {agent} in {result['path']}")
        typer.echo(f"MCP server 'agentmail' for {agent} in {result['mcp']['path']}")

    out(result, as_json, human)


@command
def uninstall(
    directory: DirOpt = None,
    exe: ExeOpt = None,
    vendor: VendorOpt = "claude",
    as_json: JsonOpt = False,
) -> None:
    """Remove agentmaild's hooks (only ours) from the vendor's config."""
    if vendor != "claude":
        from agentmaild.cli.hooks_vendor import uninstall_vendor

        result = uninstall_vendor(vendor, directory, exe or "agentmaild")
    else:
        from agentmaild.cli.hooks_vendor import unregister_mcp

        project = (directory or Path.cwd()).absolute()
        result = hooks_install.uninstall_hooks(project, exe or "agentmaild")
        result["mcp"] = unregister_mcp("claude", project)
    out(
        result,
        as_json,
        lambda: typer.echo(
            f"removed {result['removed']} agentmaild hook(s) from {result['path']}"
        ),
    )


def hook(
    event: Annotated[
        str,
        typer.Argument(
            metavar="EVENT",
            help="session-start user-prompt-submit pre-tool-use post-tool-use stop "
            "permission-request notification session-end (or Claude's names).",
        ),
    ],
    agent: Annotated[
        str | None, typer.Option("--agent", help="Default: $AGENTMAIL_AGENT.")
    ] = None,
    db: DbOpt = None,
    vendor: Annotated[
        str | None, typer.Option("--vendor", help="Output shape: claude codex gemini opencode.")
    ] = None,
) -> None:
    """Run by Claude Code (or Codex, Gemini CLI, the OpenCode plugin) with the hook JSON on
    stdin: records turn state, delivers mail.

    Never fails the session: internal errors print nothing, go to <store>/logs/hooks.log and
    exit 0. Exit 2 (PreToolUse only) blocks a Bash command that polls for mail in a loop.
    """
    argv: list[str] = []
    if agent:
        argv += ["--agent", agent]
    if db or STATE.db:
        argv += ["--db", str(db or STATE.db)]
    if vendor:
        argv += ["--vendor", vendor]
    raise typer.Exit(hooks.run_hook(event, argv))


def register(app: typer.Typer) -> None:
    """``hooks install|uninstall`` under ``agentmaild hooks``, and ``hook EVENT`` at the top."""
    hooks_app = typer.Typer(
        help="Install or remove agentmaild's hooks for Claude Code, Codex, Gemini CLI, OpenCode.",
        no_args_is_help=True,
    )
    app.add_typer(hooks_app, name="hooks")
    hooks_app.command("install")(install)
    hooks_app.command("uninstall")(uninstall)
    app.command("hook")(hook)
