"""The typer CLI: the app, its global options and ``run``; the commands live in this package's
``sending`` (send, reply, limits reset), ``read``, ``agents``, ``daemon``, ``deliveries``, ``logs``,
``store``, ``service``, ``hooks``, ``tokens``, … modules, imported only when their command runs
(``cli.lazy.COMMANDS`` names them, in the order ``--help`` lists them).

Errors print one line, ``error: …``, on stderr and exit 1 (usage errors exit 2); with ``--json``
the error is ``{"ok": false, "error": {"code", "message"}}`` on stdout.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from agentmaild import __version__
from agentmaild.cli import coercion as _coercion  # noqa: F401  (typer without pydantic)
from agentmaild.cli.common import DbOpt, TokenOpt, UrlOpt
from agentmaild.cli.lazy import LazyGroup
from agentmaild.cli.plain import set_root_options

app = typer.Typer(
    name="agentmaild",
    help="Mail for teams of AI coding agents, and the daemon that delivers it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=LazyGroup,
)


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
    set_root_options(db=db, url=url, token=token, as_json=as_json)


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
