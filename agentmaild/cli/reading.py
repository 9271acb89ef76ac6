"""The reading commands' bodies, without typer: inbox, read, ack, check, list, thread. Each takes
the keyword arguments its typer declaration in ``cli.read`` passes (same names, order and
defaults); ``plain.call`` runs one as typer's ``command`` does."""

from __future__ import annotations

import os

from agentmaild.cli import mailview
from agentmaild.cli.mailview import messages_text, summaries_text
from agentmaild.cli.plain import (
    STATE,
    Exit,
    db_target,
    echo,
    echo_text,
    emit_error,
    known_agent,
    open_store,
    out,
    overstory_mode_of,
    remote,
)
from agentmaild.cli.read_remote import api_call, api_rows, check_remote, print_rows, thread_remote
from agentmaild.errors import UsageError
from agentmaild.ids import check_message_id, check_name
from agentmaild.overstory.flavor import ORCHESTRATOR
from agentmaild.trust.peers import with_origins


def inbox(
    agent: str,
    unread: bool = False,
    db: str | None = None,
    url: str | None = None,
    token: str | None = None,
    as_json: bool = False,
) -> None:
    """``agentmaild inbox``: an agent's mail, metadata only (no bodies, no state change)."""
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
    message_id: str,
    db: str | None = None,
    url: str | None = None,
    token: str | None = None,
    as_json: bool = False,
) -> None:
    """``agentmaild read ID``: one whole message, not marked read."""
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
    message_ids: list[str],
    db: str | None = None,
    url: str | None = None,
    token: str | None = None,
    as_json: bool = False,
) -> None:
    """``agentmaild ack ID...``: mark messages read; unknown or already-read ids reported."""
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
        lambda: echo(
            f"acked {len(done)}"
            + (f"; already read or unknown: {' '.join(skipped)}" if skipped else "")
        ),
    )


def check(
    agent: str | None = None,
    inject: bool = False,
    db: str | None = None,
    url: str | None = None,
    token: str | None = None,
    as_json: bool = False,
) -> None:
    """``agentmaild check``: all unread mail for an agent, marked read (priority first)."""
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
    sender: str | None = None,
    to: str | None = None,
    type: str | None = None,
    unread: bool = False,
    limit: int = 50,
    db: str | None = None,
    url: str | None = None,
    token: str | None = None,
    as_json: bool = False,
) -> None:
    """``agentmaild list``: messages, newest first, with filters."""
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
    message_id: str,
    db: str | None = None,
    url: str | None = None,
    token: str | None = None,
    as_json: bool = False,
) -> None:
    """``agentmaild thread ID``: a whole thread, oldest first; none found: exit 1."""
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
        raise Exit(_not_found(f"no thread {message_id}", as_json))
    out({"ok": True, "messages": rows}, as_json, lambda: echo_text(messages_text(rows, found)))


def _not_found(message: str, as_json: bool) -> int:
    from agentmaild.errors import NotFound

    emit_error(NotFound(message), as_json or STATE.json)
    return 1
