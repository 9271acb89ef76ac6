"""The bodies of ``send`` and ``reply``, without typer (over the store or ``--url``), and the
daemon request behind ``send --interrupt`` and ``interrupt``. Each body takes the keyword
arguments its typer declaration in ``cli.sending`` passes; ``plain.call`` runs one as typer's
``command`` does."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agentmaild.cli.plain import echo, mailer, open_store, out, poke, remote, sender_of
from agentmaild.errors import ControlError, UsageError
from agentmaild.hot.access import check_priority, read_body
from agentmaild.ids import check_message_id, check_name

if TYPE_CHECKING:
    from agentmaild.mail.mailer import Mailer
    from agentmaild.models import Message
    from agentmaild.store.base import MailStore

# The daemon answers once the turn stopped: SIGINT, then TERM and KILL after a grace each.
_REQUEST_TIMEOUT_S = 60.0


def _remote_sender(flag: str | None) -> str | None:
    """Over HTTP the token names the sender; ``--from``/``$AGENTMAIL_AGENT`` must agree."""
    given = flag or os.environ.get("AGENTMAIL_AGENT")
    return check_name(given, "sender") if given else None


def _post(api: tuple[str, str | None], path: str, fields: dict[str, Any]) -> dict[str, Any]:
    from agentmaild.http.client import call

    return call(api, "POST", path, {k: v for k, v in fields.items() if v is not None})


def _print_sent(data: dict[str, Any], as_json: bool) -> None:
    out(data, as_json, lambda: echo("\n".join(data["ids"])))


def _anycast_to(store: MailStore, the_mailer: Mailer, to: str, who: str) -> str:
    """``send --anycast --to @group``: the group's work queue, one member takes the mail."""
    if not to.startswith("@") or to == "@all":
        raise UsageError("--anycast needs --to @capability (e.g. @builders)")
    from agentmaild.rules.queues import anycast_queue

    return anycast_queue(store, the_mailer.expand(to, who)[0])


def send(
    to: str,
    subject: str,
    body: str = "",
    sender: str | None = None,
    type: str = "status",
    priority: str = "normal",
    thread: str | None = None,
    payload: str | None = None,
    idempotency_key: str | None = None,
    anycast: bool = False,
    interrupt: bool = False,
    db: str | None = None,
    url: str | None = None,
    token: str | None = None,
    as_json: bool = False,
) -> None:
    """``agentmaild send``: one row per recipient, in one transaction; prints the id(s)."""
    check_priority(priority)
    if interrupt:
        _send_interrupt(to, subject, body, sender, thread, db, (url, anycast, type), as_json)
        return
    api = remote(url, token)
    if api is not None:
        if anycast:
            raise UsageError("send --anycast needs the store (--db), not --url")
        fields = {"to": to, "subject": subject, "body": read_body(body), "type": type,
                  "priority": priority, "thread_id": thread, "payload_json": payload,
                  "idempotency_key": idempotency_key, "from": _remote_sender(sender)}  # fmt: skip
        _print_sent(_post(api, "/v1/messages", fields), as_json)
        return
    with open_store(db) as store:
        the_mailer, who = mailer(store), sender_of(sender, store)
        if anycast:
            to = _anycast_to(store, the_mailer, to, who)
        sent = the_mailer.send(
            sender=who,
            to=to,
            subject=subject,
            body=read_body(body),
            type=type,
            priority=priority,
            thread_id=thread,
            payload=payload,
            idempotency_key=idempotency_key,
        )
        if not sent.duplicate:
            poke(store, sorted({m.to_agent for m in sent.messages}))
    out(sent.to_dict(), as_json, lambda: echo("\n".join(sent.ids)))


def _send_interrupt(to: str, subject: str, body: str, sender: str | None, thread: str | None,
                    db: str | None, other: tuple[str | None, bool, str], as_json: bool) -> None:
    """``send --interrupt``: one agent, through the store (``rules.interrupts``)."""
    from agentmaild.rules.interrupts import send_interrupt

    url, anycast, kind = other
    if url or anycast or kind not in ("status", "interrupt"):
        raise UsageError("send --interrupt takes one agent (--to NAME), the store (--db) and no "
                         "--type (it sends type interrupt, urgent)")
    with open_store(db) as store:
        who, text = sender_of(sender, store), read_body(body)
        message, again = send_interrupt(mailer(store), sender=who, to=to, subject=subject,
                                        body=text, thread_id=thread)  # fmt: skip
        report(message, ask_daemon(store, message, subject, again), as_json)


def reply(
    message_id: str,
    body: str,
    sender: str | None = None,
    type: str | None = None,
    priority: str | None = None,
    payload: str | None = None,
    idempotency_key: str | None = None,
    db: str | None = None,
    url: str | None = None,
    token: str | None = None,
    as_json: bool = False,
) -> None:
    """``agentmaild reply ID``: in the thread, to the original sender (or, from the sender, to
    the recipient)."""
    check_priority(priority)
    api = remote(url, token)
    if api is not None:
        check_message_id(message_id)
        fields = {"body": read_body(body), "type": type, "priority": priority,
                  "payload_json": payload, "idempotency_key": idempotency_key,
                  "from": _remote_sender(sender)}  # fmt: skip
        _print_sent(_post(api, f"/v1/messages/{message_id}/reply", fields), as_json)
        return
    with open_store(db) as store:
        sent = mailer(store).reply(
            message_id,
            sender=sender_of(sender, store),
            body=read_body(body),
            type=type,
            priority=priority,
            payload=payload,
            idempotency_key=idempotency_key,
        )
        if not sent.duplicate:
            poke(store, [m.to_agent for m in sent.messages])
    out(sent.to_dict(), as_json, lambda: echo("\n".join(sent.ids)))


# -- interrupts: the daemon stops the agent's running turn -------------------------------------
def ask_daemon(
    store: MailStore, message: Message, reason: str | None, duplicate: bool
) -> dict[str, Any]:
    """Ask the store's daemon to stop ``message.to_agent``'s turn for ``message``; not for a
    repeat the loop guard collapsed (the first one stopped the turn already)."""
    if duplicate:
        return {"interrupted": False, "duplicate": True,
                "detail": "the same interrupt again within duplicate_window_s: not repeated"}
    from agentmaild.config import load_config
    from agentmaild.control.client import request
    from agentmaild.control.protocol import socket_path_for

    sock = socket_path_for(store.location, load_config().daemon.socket)
    args = {"agent": message.to_agent, "message_id": message.id, "by": message.from_agent,
            "reason": reason}  # fmt: skip
    try:
        return request(sock, "interrupt", args, _REQUEST_TIMEOUT_S)
    except ControlError as exc:  # not running, not answering, no loop for the agent
        return {"interrupted": False, "detail": f"{exc.message}; the mail opens the next turn"}


def report(message: Message, answer: dict[str, Any], as_json: bool) -> None:
    data = {"id": message.id, "agent": message.to_agent, **answer}

    def human() -> None:
        verb = "interrupted" if answer.get("interrupted") else "not interrupted"
        echo(f"{message.id}\n{message.to_agent}: {verb} ({answer.get('detail')})")

    out(data, as_json, human)
