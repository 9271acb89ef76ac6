"""``agentmaild ask``: send a question and wait for its first reply (rules.ask does the waiting)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from agentmaild.cli import common as cli
from agentmaild.cli.common import DbOpt, FromOpt, JsonOpt, command, echo_text, open_store, out

TIMEOUT_EXIT = 3


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    def ask(
        to: Annotated[str, typer.Option("--to", help="Who should answer (one agent).")],
        subject: Annotated[str, typer.Option("--subject", "-s", help="One line, ≤ 256 chars.")],
        body: Annotated[str, typer.Option("--body", "-b", help="The question; '-' reads stdin.")],
        timeout: Annotated[
            str, typer.Option("--timeout", help="How long to wait: 90, 30s, 10m, 1h.")
        ] = "10m",
        sender: FromOpt = None,
        priority: Annotated[str, typer.Option("--priority", "-p")] = "normal",
        db: DbOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Send a question and block until the first reply in its thread; print the reply.

        Exit 0 with the reply; exit 3 when none came in time (the question stays answerable).
        """
        from agentmaild.hot.access import check_priority, read_body
        from agentmaild.rules.ask import ask as ask_and_wait
        from agentmaild.rules.ask import parse_timeout, timeout_message

        check_priority(priority)
        wait_s = parse_timeout(timeout)
        asker = cli.sender_of(sender)
        with open_store(db) as store:
            question, reply = ask_and_wait(
                store, asker, to, subject, read_body(body), priority, wait_s
            )
        if reply is None:
            message = timeout_message(question.id, question.to_agent, asker, wait_s)
            if as_json or cli.STATE.json:
                error = {"code": "timeout", "message": message}
                typer.echo(json.dumps({"ok": False, "question_id": question.id, "error": error}))
            else:
                typer.echo(f"error: {message}", err=True)
            raise typer.Exit(TIMEOUT_EXIT)
        found = reply
        out(
            {"ok": True, "question_id": question.id, "reply": found.to_dict()},
            as_json,
            lambda: echo_text(found.body),
        )
