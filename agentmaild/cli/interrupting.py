"""``agentmaild interrupt AGENT`` and the daemon request behind ``send --interrupt``.

The mail is written first (``rules.interrupts.send_interrupt``: who may, how often), then the
store's daemon is asked over its control socket to stop the agent's running turn. A daemon that
is not running cannot be asked: the mail waits, urgent, and opens the agent's next turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentmaild.cli.common import (
    DbOpt,
    FromOpt,
    JsonOpt,
    command,
    mailer,
    open_store,
    out,
    sender_of,
)
from agentmaild.errors import ControlError
from agentmaild.hot.access import read_body
from agentmaild.ids import check_name

if TYPE_CHECKING:
    from agentmaild.models import Message
    from agentmaild.store.base import MailStore

# The daemon answers once the turn stopped: SIGINT, then TERM and KILL after a grace each.
_REQUEST_TIMEOUT_S = 60.0


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
        typer.echo(f"{message.id}\n{message.to_agent}: {verb} ({answer.get('detail')})")

    out(data, as_json, human)


@command
def interrupt(
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent whose turn stops.")],
    reason: Annotated[
        str | None, typer.Option("--reason", "-r", help="Why; the mail's body ('-' reads stdin).")
    ] = None,
    sender: FromOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Stop AGENT's current turn; the interrupt's mail opens its next turn, in the same session.

    Only the agent's parent, a lead or the operator may. The batch the turn was working on is
    redelivered under its delivery id, never lost."""
    from agentmaild.rules.interrupts import interrupt_text, send_interrupt

    agent = check_name(agent, "agent")
    body = read_body(reason) if reason else ""
    with open_store(db) as store:
        who = sender_of(sender, store)
        subject, text = interrupt_text(who, body)
        message, again = send_interrupt(mailer(store), sender=who, to=agent, subject=subject,
                                        body=text)  # fmt: skip
        answer = ask_daemon(store, message, body or None, again)
    report(message, answer, as_json)


def register(app: typer.Typer) -> None:
    app.command()(interrupt)
