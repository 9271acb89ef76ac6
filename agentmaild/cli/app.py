"""The typer CLI: the app, its global options and ``run``; the commands live in this package's
``sending`` (send, reply, limits reset), ``read``, ``agents``, ``daemon``,
``deliveries``, ``logs``, ``store``, ``service``, ``hooks`` and ``tokens`` modules, registered here
in the order ``--help`` lists them.

Errors print one line, ``error: …``, on stderr and exit 1 (usage errors exit 2); with ``--json``
the error is ``{"ok": false, "error": {"code", "message"}}`` on stdout.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from agentmaild import __version__
from agentmaild.cli import sending as cli_sending
from agentmaild.cli.common import STATE, DbOpt, TokenOpt, UrlOpt

app = typer.Typer(
    name="agentmaild",
    help="Mail for teams of AI coding agents, and the daemon that delivers it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
agents_app = typer.Typer(help="Register and manage agents (recipients).", no_args_is_help=True)
limits_app = typer.Typer(help="Administer sending limits.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
app.add_typer(limits_app, name="limits")


def _print_version(value: bool) -> None:
    """Eager: runs while the options are parsed, before typer asks for a command."""
    if not value:
        return
    # --json may come after --version, so it is not parsed yet: look at the words themselves.
    if "--json" in sys.argv[1:]:
        typer.echo(json.dumps({"ok": True, "version": __version__}))
    else:
        typer.echo(f"agentmaild {__version__}")
    raise typer.Exit(0)


@app.callback()
def main_options(
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output for every command.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version.", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    """Mail for teams of AI coding agents. Store: one SQLite file per project."""
    STATE.db = db
    STATE.json = as_json
    STATE.url = url
    STATE.token = token


cli_sending.register(app, limits_app)


from agentmaild.cli import agents as cli_agents  # noqa: E402
from agentmaild.cli import ask as cli_ask  # noqa: E402
from agentmaild.cli import daemon as cli_daemon  # noqa: E402
from agentmaild.cli import dashboard as cli_dashboard  # noqa: E402
from agentmaild.cli import deliveries as cli_deliveries  # noqa: E402
from agentmaild.cli import hooks as cli_hooks  # noqa: E402
from agentmaild.cli import logs as cli_logs  # noqa: E402
from agentmaild.cli import mcp as cli_mcp  # noqa: E402
from agentmaild.cli import read as cli_read  # noqa: E402
from agentmaild.cli import relay as cli_relay  # noqa: E402
from agentmaild.cli import service as cli_service  # noqa: E402
from agentmaild.cli import store as cli_store  # noqa: E402
from agentmaild.cli import tokens as cli_tokens  # noqa: E402
from agentmaild.cli import trust as cli_trust  # noqa: E402

cli_ask.register(app)
cli_read.register(app)
cli_agents.register(agents_app)
cli_daemon.register(app)
cli_dashboard.register(app)
cli_deliveries.register(app)
cli_logs.register(app)
cli_service.register(app)
cli_store.register(app)
cli_hooks.register(app)
cli_tokens.register(app)
cli_trust.register(app)
cli_relay.register(app)
cli_mcp.register(app)


def _show_help(exc: typer.TyperException) -> None:
    """A bare group (``agentmaild``, ``agentmaild agents``) asked for help, which is no error.

    With rich installed the help was printed while the exception was built and its message is
    empty; without rich the message is the help text.
    """
    text = exc.format_message()
    if text.strip():
        typer.echo(text)


def run() -> None:
    """Run the CLI; usage errors become one ``error:`` line (JSON with --json) and exit 2."""
    try:
        # Without standalone mode click returns the exit code of a typer.Exit instead of exiting.
        code = app(prog_name="agentmaild", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            _show_help(exc)
            sys.exit(0)
        if "--json" in sys.argv[1:]:
            typer.echo(
                json.dumps(
                    {"ok": False, "error": {"code": "usage", "message": exc.format_message()}}
                )
            )
        else:
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.echo(f"error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
