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

from agentmaild.errors import AgentmaildError, UsageError
from agentmaild.errors import one_line as one_line
from agentmaild.hot.access import daemon_socket as daemon_socket
from agentmaild.hot.access import flavor as _flavor
from agentmaild.hot.access import mailer as mailer
from agentmaild.hot.access import poke as poke
from agentmaild.hot.access import sender_of as sender_of
from agentmaild.hot.access import store_at as store_at
from agentmaild.mail.vocab import IMPLICIT_RECIPIENTS
from agentmaild.overstory.flavor import overstory_mode
from agentmaild.render.framing import json_text, visible
from agentmaild.store.base import MailStore
from agentmaild.store.location import StoreLocation, resolve_location

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
            exc.message = _without_password(exc.message, kwargs.get("db"))
            emit_error(exc, bool(kwargs.get("as_json")) or STATE.json)
            raise typer.Exit(2 if isinstance(exc, UsageError) else 1) from None

    return wrapper


def _without_password(message: str, db: object) -> str:
    """The last guard before a terminal: no error names the store's password, whoever wrote it
    (the store's own errors are scrubbed where they are made)."""
    from agentmaild.store.redaction import scrub

    try:
        return scrub(message, db_target(db if isinstance(db, str) else None))
    except AgentmaildError:  # no store to name: nothing of it to take out
        return message


def out(data: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    if as_json or STATE.json:
        typer.echo(json_text(data))  # C1 and bidi controls escaped: a person may be reading
    elif human is not None:
        human()


def remote(url: str | None, token: str | None) -> tuple[str, str | None] | None:
    """The HTTP API to use instead of the store (``--url``, else ``$AGENTMAIL_URL``), or None."""
    from agentmaild.http.client import target

    return target(url or STATE.url, token or STATE.token)


def db_location(db: str | None) -> StoreLocation:
    """Where the store is (``--db``, else ``$AGENTMAIL_DB``, the config, the project default)."""
    return resolve_location(db or STATE.db)


def db_target(db: str | None) -> str:
    """What names the store: a file path or a ``postgresql://`` DSN."""
    return db_location(db).target


def db_path(db: str | None) -> Path:
    """The store's file, for the commands that need one (a server's store is a usage error)."""
    location = db_location(db)
    if not location.is_file:
        raise UsageError(f"this command works on a store file, not a server's: {location.shown}")
    return location.local_path


@contextmanager
def open_store(
    db: str | None, *, readonly: bool = False, create: bool = True
) -> Iterator[MailStore]:
    """The store; ``readonly`` for the commands that only look (they never create one)."""
    store = store_at(db_location(db), readonly=readonly, create=create)
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
    """Whether the store ``db`` names (``--db``, else the default) is in Overstory mode (only
    a store file can be: it shares Overstory's directory)."""
    location = db_location(db)
    return location.is_file and overstory_mode(location.local, _flavor())
