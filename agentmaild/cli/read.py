"""The reading commands: inbox, read, ack, check, list, thread, purge — parse, call the store,
print; no logic."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from agentmaild.cli import mailview
from agentmaild.cli.common import (
    STATE,
    DbOpt,
    JsonOpt,
    TokenOpt,
    UrlOpt,
    command,
    db_target,
    echo_text,
    emit_error,
    known_agent,
    open_store,
    out,
    overstory_mode_of,
    remote,
)
from agentmaild.cli.mailview import messages_text, summaries_text
from agentmaild.cli.read_remote import api_call, api_rows, check_remote, print_rows, thread_remote
from agentmaild.errors import UsageError
from agentmaild.ids import check_message_id, check_name, iso_now
from agentmaild.overstory.flavor import ORCHESTRATOR
from agentmaild.store.base import MailStore
from agentmaild.trust.peers import with_origins

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
    check_name(agent, loose=overstory_mode_of(db))
    api = remote(url, token)
    if api is not None:
        query = {"agent": agent, "unread": "1" if unread else "0"}
        rows = api_rows(api, "GET", "/v1/inbox", query=query)
        print_rows({"ok": True, "agent": agent}, rows, as_json, f"no mail for {agent}")
        return
    with open_store(db, readonly=True) as store:
        found = store.inbox(agent, unread_only=unread)
        if not found:
            known_agent(store, agent)
        rows = with_origins(store, found, whole=False)
    out(
        {"ok": True, "agent": agent, "messages": rows},
        as_json,
        lambda: echo_text(summaries_text(rows, found) or f"no mail for {agent}"),
    )


def read_cmd(
    message_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fetch one whole message. Does not mark it read (use `ack`)."""
    check_message_id(message_id)
    api = remote(url, token)
    if api is not None:
        data = api_call(api, "GET", f"/v1/messages/{message_id}")
        out(data, as_json, lambda: echo_text(messages_text([data["message"]])))
        return
    with open_store(db, readonly=True) as store:
        from agentmaild.mail.mailer import Mailer

        m = Mailer(store).get(message_id)
        [row] = with_origins(store, [m], whole=True)
    out({"ok": True, "message": row}, as_json, lambda: echo_text(messages_text([row], [m])))


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
    for mid in message_ids:
        check_message_id(mid)
    api = remote(url, token)
    if api is not None:
        done = list(api_call(api, "POST", "/v1/ack", {"ids": message_ids})["acked"])
    else:
        with open_store(db) as store:
            done = store.ack(message_ids)
    skipped = [m for m in message_ids if m not in done]
    out(
        {"ok": True, "acked": done, "skipped": skipped},
        as_json,
        lambda: typer.echo(
            f"acked {len(done)}"
            + (f"; already read or unknown: {' '.join(skipped)}" if skipped else "")
        ),
    )


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
    from agentmaild.hot import check as fast
    overstory = overstory_mode_of(db)
    name = agent or os.environ.get("AGENTMAIL_AGENT") or (ORCHESTRATOR if overstory else None)
    if not name:
        raise UsageError("check: --agent is required (or set AGENTMAIL_AGENT)")
    check_name(name, "agent (--agent)", loose=overstory)
    api = remote(url, token)
    if api is not None:
        check_remote(api, name, inject, as_json)
        return
    if inject:  # the hot path's own take, render and ack (entry.py routes most calls there)
        text, ids = fast.check_inject(name, db_target(db))
        out({"ok": True, "acked": ids, "text": text}, as_json, lambda: echo_text(text, nl=False))
        return
    with open_store(db, create=False) as store:
        found = store.take_unread(name)
        if not found:
            known_agent(store, name)
        rows = with_origins(store, found, whole=True)
    out(
        {"ok": True, "agent": name, "messages": rows},
        as_json,
        lambda: echo_text(messages_text(rows, found) or f"no unread mail for {name}"),
    )


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
    api = remote(url, token)
    if api is not None:
        query = {"from": sender, "to": to, "type": type, "unread": "1" if unread else None,
                 "limit": str(limit)}  # fmt: skip
        print_rows({"ok": True}, api_rows(api, "GET", "/v1/messages", query=query), as_json,
                    "no messages")  # fmt: skip
        return
    with open_store(db, readonly=True) as store:
        found = store.list_messages(
            from_agent=sender, to_agent=to, type=type, unread=True if unread else None, limit=limit
        )
        rows = with_origins(store, found, whole=False)
    out(
        {"ok": True, "messages": rows},
        as_json,
        lambda: echo_text(summaries_text(rows, found) or "no messages"),
    )


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
    check_message_id(message_id)
    api = remote(url, token)
    if api is not None:
        rows = thread_remote(api, message_id)
        found = [mailview.from_api(r) for r in rows]
    else:
        with open_store(db, readonly=True) as store:
            root = store.get_message(message_id)
            found = store.thread(root.thread_id or root.id if root else message_id)
            rows = with_origins(store, found, whole=True)
    if not found:
        raise typer.Exit(_not_found(f"no thread {message_id}", as_json))
    out({"ok": True, "messages": rows}, as_json, lambda: echo_text(messages_text(rows, found)))


def _not_found(message: str, as_json: bool) -> int:
    from agentmaild.errors import NotFound

    emit_error(NotFound(message), as_json or STATE.json)
    return 1


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
