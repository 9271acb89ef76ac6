"""What every CLI command shares: the --db/--json options, error mapping, output, store access."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from agentmaild.access import daemon_socket as daemon_socket
from agentmaild.access import flavor as _flavor
from agentmaild.access import mailer as mailer
from agentmaild.access import poke as poke
from agentmaild.access import sender_of as sender_of
from agentmaild.access import store_at as store_at
from agentmaild.errors import AgentmaildError, UsageError
from agentmaild.errors import one_line as one_line
from agentmaild.location import is_dsn, resolve_db, resolve_db_str
from agentmaild.mail import IMPLICIT_RECIPIENTS
from agentmaild.overstory.flavor import overstory_mode
from agentmaild.render import json_text, visible
from agentmaild.store.base import MailStore

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


class _State:
    db: str | None = None
    json: bool = False
    url: str | None = None
    token: str | None = None


STATE = _State()


def echo_text(text: str, *, nl: bool = True) -> None:
    """Mail text for a human. On a terminal, control characters (newline and tab aside) are
    made visible, so a message cannot drive it; to a pipe the bytes go as stored (``color``
    stops click from stripping what looks like ANSI styling)."""
    if sys.stdout.isatty():
        typer.echo(visible(text), nl=nl)
    else:
        typer.echo(text, nl=nl, color=True)


def emit_error(exc: AgentmaildError, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(exc.to_json()))
    else:
        typer.echo(f"error: {one_line(exc.message)}", err=True)


def command(fn: Callable[P, R]) -> Callable[P, R]:
    """Maps AgentmaildError to one line and exit 1 (2 for a UsageError), honouring ``--json``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except AgentmaildError as exc:
            emit_error(exc, bool(kwargs.get("as_json")) or STATE.json)
            raise typer.Exit(2 if isinstance(exc, UsageError) else 1) from None

    return wrapper


def out(data: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    if as_json or STATE.json:
        typer.echo(json_text(data))  # C1 and bidi controls escaped: a person may be reading
    elif human is not None:
        human()


def remote(url: str | None, token: str | None) -> tuple[str, str | None] | None:
    """The HTTP API to use instead of the store (``--url``, else ``$AGENTMAIL_URL``), or None."""
    from agentmaild.http.client import target

    return target(url or STATE.url, token or STATE.token)


def db_target(db: str | None) -> str:
    """Where the store is: a file path or a ``postgresql://`` DSN."""
    return resolve_db_str(db or STATE.db)


def db_path(db: str | None) -> Path:
    """The store's file, for the commands that need one (a DSN is a usage error there)."""
    target = db_target(db)
    if is_dsn(target):
        raise UsageError("this command works on a SQLite store file, not a PostgreSQL DSN")
    return resolve_db(target)


@contextmanager
def open_store(
    db: str | None, *, readonly: bool = False, create: bool = True
) -> Iterator[MailStore]:
    """The store; ``readonly`` for the commands that only look (they never create one)."""
    store = store_at(db_target(db), readonly=readonly, create=create)
    try:
        yield store
    finally:
        store.close()


def known_agent(store: MailStore, name: str) -> None:
    """Raise UnknownAgent unless ``name`` is registered, implicit (operator) or was ever mailed
    (``Mailer.check_known``: the mail rule of ``send`` under the config's limits)."""
    if name in IMPLICIT_RECIPIENTS or store.get_agent(name) is not None:
        return  # the common answer, without loading the config
    mailer(store).check_known(name)


def overstory_mode_of(db: str | None) -> bool:
    """Whether the store ``db`` names (``--db``, else the default) is in Overstory mode."""
    if is_dsn(db_target(db)):
        return False
    return overstory_mode(str(db_path(db)), _flavor())
