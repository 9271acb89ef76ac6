"""The reading commands: inbox, read, ack, check, list, thread, purge — their typer declarations
(options, help); the bodies of all but purge are ``cli.reading``'s, which run without typer."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from agentmaild.cli import reading
from agentmaild.cli.common import (
    DbOpt,
    JsonOpt,
    TokenOpt,
    UrlOpt,
    command,
    open_store,
    out,
    overstory_mode_of,
)
from agentmaild.errors import UsageError
from agentmaild.ids import check_name, iso_now
from agentmaild.store.base import MailStore

AgentOpt = Annotated[str, typer.Option("--agent", "-a", help="Whose mail.")]


def inbox(
    agent: AgentOpt,
    unread: Annotated[bool, typer.Option("--unread", help="Unread only.")] = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Probe: list an agent's mail, metadata only (no bodies, no state change)."""
    reading.inbox(agent, unread, db, url, token, as_json)


def read_cmd(
    message_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fetch one whole message. Does not mark it read (use `ack`)."""
    reading.read_cmd(message_id, db, url, token, as_json)


def ack(
    message_ids: Annotated[
        list[str], typer.Argument(metavar="ID...", help="Messages to mark read.")
    ],
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mark messages read. Unknown or already-read ids are reported, not errors."""
    reading.ack(message_ids, db, url, token, as_json)


def check(
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", "-a", help="Default: $AGENTMAIL_AGENT (Overstory mode: else orchestrator)."
        ),
    ] = None,
    inject: Annotated[
        bool, typer.Option("--inject", help="Print as context for an agent (hooks).")
    ] = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fetch all unread mail for an agent and mark it read (priority first)."""
    reading.check(agent, inject, db, url, token, as_json)


def list_cmd(
    sender: Annotated[str | None, typer.Option("--from")] = None,
    to: Annotated[str | None, typer.Option("--to", "--agent", help="Recipient.")] = None,
    type: Annotated[str | None, typer.Option("--type", "-t")] = None,
    unread: Annotated[bool, typer.Option("--unread")] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", min=1, max=100_000, help="At most this many, newest first."),
    ] = 50,
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List messages, newest first, with filters."""
    reading.list_cmd(sender, to, type, unread, limit, db, url, token, as_json)


def thread(
    message_id: Annotated[
        str, typer.Argument(metavar="ID", help="A thread id or any message in it.")
    ],
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a whole thread, oldest first."""
    reading.thread(message_id, db, url, token, as_json)


def _purge_history(
    store: MailStore, older_than: float | None, agent: str | None, everything: bool
) -> int:
    """Delivery-history rows past ``[store] attempts_keep_days``, and those the filters select."""
    from agentmaild.config import load_config

    keep_s = load_config().store.attempts_keep_days * 86400
    expired = store.purge_attempts(older_than=time.time() - keep_s)
    return expired + store.purge_attempts(older_than=older_than, agent=agent, everything=everything)


def purge(
    days: Annotated[float | None, typer.Option("--days", min=0, help="Older than N days.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="To or from this agent.")] = None,
    everything: Annotated[bool, typer.Option("--all", help="Every message.")] = False,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete messages: at least one of --days, --agent, --all.

    The delivery history they select goes too, and any history older than attempts_keep_days
    (store section of the config).
    """
    if days is None and agent is None and not everything:
        raise UsageError("purge: give at least one of --days N, --agent X, --all")
    cutoff, cutoff_s = None, None
    if days is not None:
        cutoff_s = (datetime.now(UTC) - timedelta(days=days)).timestamp()
        cutoff = iso_now(cutoff_s)
    if agent is not None:
        check_name(agent, loose=overstory_mode_of(db))
    with open_store(db) as store:
        n = store.purge(older_than=cutoff, agent=agent, everything=everything)
        attempts = _purge_history(store, cutoff_s, agent, everything)
    out(
        {"ok": True, "deleted": n, "attempts_deleted": attempts},
        as_json,
        lambda: typer.echo(f"deleted {n} message(s), {attempts} delivery attempt record(s)"),
    )


def register(app: typer.Typer) -> None:
    """Add the reading commands to the main CLI, in this order."""
    for fn, name in (
        (inbox, "inbox"),
        (read_cmd, "read"),
        (ack, "ack"),
        (check, "check"),
        (list_cmd, "list"),
        (thread, "thread"),
        (purge, "purge"),
    ):
        app.command(name=name)(command(fn))
