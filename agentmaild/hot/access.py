"""How a command reaches the store and the daemon, without typer: the CLI (``cli.common``) and
the hot ``send`` (``fast_send``) share these, so both open, send and poke alike.

Owns: opening the store a target names, the mailer under the config's limits, the sender's
identity, a body read from stdin, the poke of this machine's daemon.
May import: ``mail``, ``store``, ``config`` and ``control`` (lazily where a command may not need
them); never typer, structlog or asyncio.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agentmaild.errors import UsageError, ValidationError
from agentmaild.ids import check_name
from agentmaild.overstory.flavor import default_identity
from agentmaild.store.base import MailStore
from agentmaild.store.kinds import open_store
from agentmaild.store.location import StoreLocation

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmaild.mail.mailer import Mailer


def store_at(
    target: str | StoreLocation, *, readonly: bool = False, create: bool = True
) -> MailStore:
    """The store ``target`` names (a path, a DSN or a location), under the config's flavor; one
    line on stderr when this made a new store file (where it is)."""
    location = StoreLocation.of(target)
    new = create and not readonly and location.is_file and not os.path.lexists(location.local)
    store = open_store(location, readonly=readonly, create=create, flavor=flavor())
    if new and location.target != ":memory:":
        # never silently: a typo'd --db or a command run outside the project makes a new store
        where = os.path.abspath(location.local)
        sys.stderr.write(f"agentmaild: created a new store at {where}\n")
        sys.stderr.flush()
    return store


def mailer(store: MailStore) -> Mailer:
    """The mail rules over ``store`` (loaded here: the commands that only read never need them)."""
    from agentmaild.config import load_config
    from agentmaild.mail.mailer import Mailer

    return Mailer(store, load_config().limits)


def sender_of(flag: str | None, store: MailStore | None = None) -> str:
    """``--from``/``--agent``, else ``$AGENTMAIL_AGENT``, else the default identity (``operator``;
    Overstory's ``orchestrator`` in Overstory mode)."""
    ov = store is not None and store.overstory is not None
    default = default_identity(ov)
    return check_name(flag or os.environ.get("AGENTMAIL_AGENT") or default, "sender", loose=ov)


def check_priority(value: str | None) -> str | None:
    """``--priority`` outside the vocabulary is a usage error (exit 2), caught before the store."""
    from agentmaild.mail.vocab import PRIORITIES

    if value is not None and value not in PRIORITIES:
        raise UsageError(f"priority: unknown {value!r}; one of {', '.join(PRIORITIES)}")
    return value


def flavor() -> str:
    from agentmaild.config import load_config

    return load_config().store.flavor


def read_body(body: str) -> str:
    """``--body`` as given, or stdin's bytes as UTF-8 for ``-``."""
    if body != "-":
        return body
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"body: stdin is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from exc


def daemon_socket(store: MailStore) -> Path | None:
    """The control socket of the store's daemon on this machine, when its file exists."""
    from agentmaild.config import load_config
    from agentmaild.control.protocol import socket_path_for

    sock = socket_path_for(store.location, load_config().daemon.socket)
    return sock if sock.exists() else None


def poke(store: MailStore, agents: list[str] | None) -> None:
    """After a commit: wake the store's daemon through its wake seam (``store.wake``), at once
    (best effort: it polls anyway). A store file's daemon gets a datagram; a PostgreSQL store's
    was already woken by the commit's NOTIFY."""
    from agentmaild.config import load_config
    from agentmaild.store.kinds import wakes_for

    location = store.location
    if location is not None:
        wakes_for(location, load_config().daemon.socket).notify(agents)
