"""What every CLI command shares: the --db/--json options and the ``command`` decorator (typer);
the error mapping, output and store access are ``cli.plain``'s (typer-free), re-exported here."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, ParamSpec, TypeVar

import typer

from agentmaild.cli.plain import STATE as STATE
from agentmaild.cli.plain import Exit, failed
from agentmaild.cli.plain import _without_password as _without_password
from agentmaild.cli.plain import daemon_socket as daemon_socket
from agentmaild.cli.plain import db_location as db_location
from agentmaild.cli.plain import db_path as db_path
from agentmaild.cli.plain import db_target as db_target
from agentmaild.cli.plain import echo_text as echo_text
from agentmaild.cli.plain import emit_error as emit_error
from agentmaild.cli.plain import known_agent as known_agent
from agentmaild.cli.plain import mailer as mailer
from agentmaild.cli.plain import one_line as one_line
from agentmaild.cli.plain import open_store as open_store
from agentmaild.cli.plain import out as out
from agentmaild.cli.plain import overstory_mode_of as overstory_mode_of
from agentmaild.cli.plain import poke as poke
from agentmaild.cli.plain import remote as remote
from agentmaild.cli.plain import sender_of as sender_of
from agentmaild.cli.plain import store_at as store_at
from agentmaild.errors import AgentmaildError

P = ParamSpec("P")
R = TypeVar("R")

DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Store: a file path or a postgresql:// DSN (default: $AGENTMAIL_DB, config, "
        "<repo>/.agentmail/mail.db).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
UrlOpt = Annotated[
    str | None,
    typer.Option("--url", help="The daemon's HTTP API (default: $AGENTMAIL_URL); not the store."),
]
TokenOpt = Annotated[
    str | None, typer.Option("--token", help="Bearer token for --url (default: $AGENTMAIL_TOKEN).")
]
FromOpt = Annotated[
    str | None,
    typer.Option(
        "--from",
        "--agent",
        help="Sender (default: $AGENTMAIL_AGENT, else operator; orchestrator in Overstory mode).",
    ),
]


def command(fn: Callable[P, R]) -> Callable[P, R]:
    """Maps AgentmaildError to one line and exit 1 (2 for a UsageError), honouring ``--json``
    (``plain.failed``, as ``plain.call`` does), and a body's ``plain.Exit`` to ``typer.Exit``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except AgentmaildError as exc:
            raise typer.Exit(failed(exc, kwargs)) from None
        except Exit as exc:  # a body's own exit (``plain.Exit``)
            raise typer.Exit(exc.code) from None

    return wrapper
