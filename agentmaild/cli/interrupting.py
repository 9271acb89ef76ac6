"""``agentmaild interrupt AGENT`` and the daemon request behind ``send --interrupt``.

The mail is written first (``rules.interrupts.send_interrupt``: who may, how often), then the
store's daemon is asked over its control socket to stop the agent's running turn. A daemon that
is not running cannot be asked: the mail waits, urgent, and opens the agent's next turn.
(``ask_daemon`` and ``report`` are ``cli.sends``', which ``send --interrupt`` runs without typer.)
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentmaild.cli.common import (
    DbOpt,
    FromOpt,
    JsonOpt,
    command,
    mailer,
    open_store,
    sender_of,
)
from agentmaild.cli.sends import ask_daemon as ask_daemon
from agentmaild.cli.sends import report as report
from agentmaild.hot.access import read_body
from agentmaild.ids import check_name


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
