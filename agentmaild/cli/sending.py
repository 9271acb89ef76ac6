"""The sending commands: ``send``, ``reply``, ``limits reset`` and ``limits show`` (over the store
or ``--url``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentmaild.cli.common import (
    DbOpt,
    FromOpt,
    JsonOpt,
    TokenOpt,
    UrlOpt,
    command,
    mailer,
    open_store,
    out,
    poke,
    remote,
    sender_of,
)
from agentmaild.errors import UsageError
from agentmaild.hot.access import check_priority, read_body
from agentmaild.ids import check_message_id, check_name

if TYPE_CHECKING:
    from agentmaild.mail.mailer import Mailer
    from agentmaild.store.base import MailStore


def _remote_sender(flag: str | None) -> str | None:
    """Over HTTP the token names the sender; ``--from``/``$AGENTMAIL_AGENT`` must agree."""
    given = flag or os.environ.get("AGENTMAIL_AGENT")
    return check_name(given, "sender") if given else None


def _post(api: tuple[str, str | None], path: str, fields: dict[str, Any]) -> dict[str, Any]:
    from agentmaild.http.client import call

    return call(api, "POST", path, {k: v for k, v in fields.items() if v is not None})


def _print_sent(data: dict[str, Any], as_json: bool) -> None:
    out(data, as_json, lambda: typer.echo("\n".join(data["ids"])))


def _anycast_to(store: MailStore, the_mailer: Mailer, to: str, who: str) -> str:
    """``send --anycast --to @group``: the group's work queue, one member takes the mail."""
    if not to.startswith("@") or to == "@all":
        raise UsageError("--anycast needs --to @capability (e.g. @builders)")
    from agentmaild.rules.queues import anycast_queue

    return anycast_queue(store, the_mailer.expand(to, who)[0])


_AnycastOpt = Annotated[
    bool, typer.Option("--anycast", help="With --to @group: one member, as a work queue.")
]
_InterruptOpt = Annotated[
    bool, typer.Option("--interrupt", help="Stop the agent's turn; this mail opens the next.")
]


# -- sending --------------------------------------------------------------------------------
@command
def send(
    to: Annotated[
        str,
        typer.Option("--to", help="Recipient name, a group (@all, @builders, …) or queue:NAME."),
    ],
    subject: Annotated[str, typer.Option("--subject", "-s", help="One line, ≤ 256 chars.")],
    body: Annotated[str, typer.Option("--body", "-b", help="Message text; '-' reads stdin.")] = "",
    sender: FromOpt = None,
    type: Annotated[
        str, typer.Option("--type", "-t", help="status question result error or a protocol type.")
    ] = "status",
    priority: Annotated[
        str, typer.Option("--priority", "-p", help="low normal high urgent.")
    ] = "normal",
    thread: Annotated[str | None, typer.Option("--thread", help="Thread id: a message id.")] = None,
    payload: Annotated[
        str | None, typer.Option("--payload", help="JSON payload (required for protocol types).")
    ] = None,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", help="Same key + content → same ids.")
    ] = None,
    anycast: _AnycastOpt = False,
    interrupt: _InterruptOpt = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a message; one row per recipient, in one transaction. Prints the id(s)."""
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
    out(sent.to_dict(), as_json, lambda: typer.echo("\n".join(sent.ids)))


def _send_interrupt(to: str, subject: str, body: str, sender: str | None, thread: str | None,
                    db: str | None, other: tuple[str | None, bool, str], as_json: bool) -> None:
    """``send --interrupt``: one agent, through the store (``rules.interrupts``)."""
    from agentmaild.cli.interrupting import ask_daemon, report
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


@command
def reply(
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The message replied to.")],
    body: Annotated[str, typer.Option("--body", "-b", help="Reply text; '-' reads stdin.")],
    sender: FromOpt = None,
    type: Annotated[
        str | None, typer.Option("--type", "-t", help="Default: the original's.")
    ] = None,
    priority: Annotated[
        str | None, typer.Option("--priority", "-p", help="Default: the original's.")
    ] = None,
    payload: Annotated[str | None, typer.Option("--payload")] = None,
    idempotency_key: Annotated[str | None, typer.Option("--idempotency-key")] = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Reply in the thread: to the original sender (or, from the sender, to the recipient)."""
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
    out(sent.to_dict(), as_json, lambda: typer.echo("\n".join(sent.ids)))


@command
def limits_reset(
    sender: Annotated[str | None, typer.Option("--from", help="Sender of the pair.")] = None,
    to: Annotated[str | None, typer.Option("--to", help="Recipient of the pair.")] = None,
    thread: Annotated[
        str | None, typer.Option("--thread", help="Release a thread the loop guard holds.")
    ] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Clear the rate-limit window of one from→to pair, or release a held thread (--thread)."""
    if thread is not None:
        if sender is not None or to is not None:
            raise UsageError("limits reset: give --thread, or --from and --to, not both")
        check_message_id(thread)
        with open_store(db) as store:
            held = store.release_thread(thread)
        out(
            {"ok": True, "thread": thread, "released": held},
            as_json,
            lambda: typer.echo(f"released {held} hold(s) on thread {thread}"),
        )
        return
    if sender is None or to is None:
        raise UsageError("limits reset needs --from and --to (a rate-limit pair) or --thread ID")
    check_name(sender, "sender")
    check_name(to, "recipient")
    with open_store(db) as store:
        n = store.reset_rate_limit(sender, to)
    out(
        {"ok": True, "cleared": n},
        as_json,
        lambda: typer.echo(f"cleared {n} entries for {sender}→{to}"),
    )


@command
def limits_show(db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """The team rules every send on the store is judged by: its daemon's limits section, else
    the built-in defaults (a sender's own config never counts for them)."""
    from agentmaild.config import TEAM_RULES, team_limits, team_values

    with open_store(db, readonly=True) as store:
        stored = store.team_rules()
    rules = team_values(team_limits(stored))
    defaults = [k for k in TEAM_RULES if k not in stored]

    def human() -> None:
        head = ("team rules, as the store's daemon wrote them" if stored
                else "team rules: the built-in defaults (no daemon has written any)")
        typer.echo(head + "; a sender's own [limits] never changes them")
        for key, value in rules.items():
            note = "  (default)" if stored and key in defaults else ""
            typer.echo(f"  {key:<20} {value}{note}")

    out({"ok": True, "rules": rules, "written": bool(stored), "defaults": defaults},
        as_json, human)  # fmt: skip


def register(app: typer.Typer) -> None:
    """``send`` and ``reply`` at the top, ``reset`` and ``show`` under ``agentmaild limits``."""
    app.command()(send)
    app.command()(reply)
    limits_app = typer.Typer(help="Administer sending limits.", no_args_is_help=True)
    app.add_typer(limits_app, name="limits")
    limits_app.command("reset")(limits_reset)
    limits_app.command("show")(limits_show)
