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
        from agentmaild.rules.ask import parse_timeout, wait_for_reply

        check_priority(priority)
        wait_s = parse_timeout(timeout)
        asker = cli.sender_of(sender)
        with open_store(db) as store:
            sent = cli.mailer(store).send(
                sender=asker, to=to, subject=subject, body=read_body(body),
                type="question", priority=priority,
            )  # fmt: skip
            question = sent.messages[0]
            cli.poke(store, [question.to_agent])
            sock = cli.daemon_socket(store)
            reply = wait_for_reply(store, sock, question.id, asker, wait_s)
            if reply is not None:
                store.ack([reply.id], by="ask")
        if reply is None:
            message = (
                f"no reply to {question.id} from {question.to_agent} within {wait_s:g}s; the "
                f"question stays open: its answer will be in {asker}'s mail "
                f"(`agentmaild thread {question.id}`)"
            )
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
