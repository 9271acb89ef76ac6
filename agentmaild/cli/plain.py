"""What the everyday commands' bodies share, without typer: the root options (``STATE``), output
(``echo``, ``echo_text``, ``out``), the error mapping (``call``, ``Exit``, ``failed``) and store
access. ``cli.common`` re-exports all of it beside typer's option aliases and ``command``; a body
imports only this module, so a reader of the command line other than typer can run it
(``call``) with the same output, errors and exit codes.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

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


class _State:
    """The root command's options (``agentmaild --db … --json <command>``)."""

    db: str | None = None
    json: bool = False
    url: str | None = None
    token: str | None = None


STATE = _State()


def set_root_options(
    db: str | None = None, url: str | None = None, token: str | None = None, as_json: bool = False
) -> None:
    """What the root's options say, for every command after them (the typer app's callback and
    the fast path both set them here)."""
    STATE.db, STATE.url, STATE.token, STATE.json = db, url, token, as_json


# -- output: click's ``echo`` for a str ---------------------------------------------------------
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")  # the styling click strips off a non-terminal


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except Exception:
        return False


def _ascii(stream: IO[str]) -> bool:
    """Click reopens a stream whose encoding is ASCII (or unknown) as UTF-8, errors replaced."""
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name == "ascii"
    except LookupError:
        return False


def echo(
    message: str = "", *, nl: bool = True, err: bool = False, color: bool | None = None
) -> None:
    """``message`` (and a newline) on stdout, or stderr with ``err``, flushed; ANSI styling is
    stripped when ``color`` is None and the stream is no terminal (``color=False``: always)."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    text = message + "\n" if nl else message
    if not text:
        stream.flush()
        return
    if not _isatty(stream) if color is None else not color:
        text = _ANSI.sub("", text)
    binary = getattr(stream, "buffer", None)
    if binary is not None and _ascii(stream):
        stream.flush()
        binary.write(text.encode("utf-8", "replace"))
        binary.flush()
        return
    stream.write(text)
    stream.flush()


def echo_text(text: str, *, nl: bool = True) -> None:
    """Mail text for a human. On a terminal, control characters (newline and tab aside) are
    made visible, so a message cannot drive it; to a pipe the bytes go as stored (``color``
    keeps what looks like ANSI styling)."""
    if sys.stdout.isatty():
        echo(visible(text), nl=nl)
    else:
        echo(text, nl=nl, color=True)


def emit_error(exc: AgentmaildError, as_json: bool) -> None:
    if as_json:
        echo(json.dumps(exc.to_json()))
    else:
        echo(f"error: {one_line(exc.message)}", err=True)


def out(data: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    if as_json or STATE.json:
        echo(json_text(data))  # C1 and bidi controls escaped: a person may be reading
    elif human is not None:
        human()


# -- errors and exit codes ----------------------------------------------------------------------
class Exit(Exception):
    """End the command with ``code`` (its output already printed): ``typer.Exit`` of a body."""

    def __init__(self, code: int = 0) -> None:
        super().__init__(code)
        self.code = code


def failed(exc: AgentmaildError, kwargs: dict[str, Any]) -> int:
    """Report ``exc`` of a body called with ``kwargs`` (one line, or JSON with ``--json``) and
    return its exit code: 2 for a UsageError, else 1."""
    exc.message = _without_password(exc.message, kwargs.get("db"))
    emit_error(exc, bool(kwargs.get("as_json")) or STATE.json)
    return 2 if isinstance(exc, UsageError) else 1


def call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> int:
    """Run the body ``fn(**kwargs)`` as its typer command does; its exit code."""
    try:
        fn(**kwargs)
    except AgentmaildError as exc:
        return failed(exc, kwargs)
    except Exit as exc:
        return exc.code
    return 0


def _without_password(message: str, db: object) -> str:
    """The last guard before a terminal: no error names the store's password, whoever wrote it
    (the store's own errors are scrubbed where they are made)."""
    from agentmaild.store.redaction import scrub

    try:
        return scrub(message, db_target(db if isinstance(db, str) else None))
    except AgentmaildError:  # no store to name: nothing of it to take out
        return message


# -- the store and the HTTP API -----------------------------------------------------------------
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
