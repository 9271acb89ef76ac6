"""The sending commands: ``send``, ``reply`` (their typer declarations; the bodies are
``cli.sends``', which run without typer), ``limits reset`` and ``limits show`` (over the store
or ``--url``)."""

from __future__ import annotations

from typing import Annotated

import typer

from agentmaild.cli import sends
from agentmaild.cli.common import (
    DbOpt,
    FromOpt,
    JsonOpt,
    TokenOpt,
    UrlOpt,
    command,
    open_store,
    out,
)
from agentmaild.errors import UsageError
from agentmaild.ids import check_message_id, check_name

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
    sends.send(to, subject, body, sender, type, priority, thread, payload, idempotency_key,
               anycast, interrupt, db, url, token, as_json)  # fmt: skip


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
    sends.reply(message_id, body, sender, type, priority, payload, idempotency_key, db, url,
                token, as_json)  # fmt: skip


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
