"""The typer CLI: the app, its global options, the sending commands (send, reply, limits reset)
and ``run``; the other commands live in this package's ``read``, ``agents``, ``daemon``,
``deliveries``, ``logs``, ``store``, ``service``, ``hooks`` and ``tokens`` modules, registered here
in the order ``--help`` lists them.

Errors print one line, ``error: …``, on stderr and exit 1 (usage errors exit 2); with ``--json``
the error is ``{"ok": false, "error": {"code", "message"}}`` on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Any

import typer

from agentmaild import __version__
from agentmaild.cli.common import (
    STATE,
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
from agentmaild.hot.access import read_body
from agentmaild.ids import check_message_id, check_name

app = typer.Typer(
    name="agentmaild",
    help="Mail for teams of AI coding agents, and the daemon that delivers it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
agents_app = typer.Typer(help="Register and manage agents (recipients).", no_args_is_help=True)
limits_app = typer.Typer(help="Administer sending limits.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
app.add_typer(limits_app, name="limits")


def _remote_sender(flag: str | None) -> str | None:
    """Over HTTP the token names the sender; ``--from``/``$AGENTMAIL_AGENT`` must agree."""
    given = flag or os.environ.get("AGENTMAIL_AGENT")
    return check_name(given, "sender") if given else None


def _post(api: tuple[str, str | None], path: str, fields: dict[str, Any]) -> dict[str, Any]:
    from agentmaild.http.client import call

    return call(api, "POST", path, {k: v for k, v in fields.items() if v is not None})


def _print_sent(data: dict[str, Any], as_json: bool) -> None:
    out(data, as_json, lambda: typer.echo("\n".join(data["ids"])))


def _print_version(value: bool) -> None:
    """Eager: runs while the options are parsed, before typer asks for a command."""
    if not value:
        return
    # --json may come after --version, so it is not parsed yet: look at the words themselves.
    if "--json" in sys.argv[1:]:
        typer.echo(json.dumps({"ok": True, "version": __version__}))
    else:
        typer.echo(f"agentmaild {__version__}")
    raise typer.Exit(0)


@app.callback()
def main_options(
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output for every command.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version.", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    """Mail for teams of AI coding agents. Store: one SQLite file per project."""
    STATE.db = db
    STATE.json = as_json
    STATE.url = url
    STATE.token = token


# -- sending --------------------------------------------------------------------------------
@app.command()
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
    thread: Annotated[
        str | None, typer.Option("--thread", help="Thread id (a message id).")
    ] = None,
    payload: Annotated[
        str | None, typer.Option("--payload", help="JSON payload (required for protocol types).")
    ] = None,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", help="Same key + content → same ids.")
    ] = None,
    anycast: Annotated[
        bool, typer.Option("--anycast", help="With --to @group: one member, as a work queue.")
    ] = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a message; one row per recipient, in one transaction. Prints the id(s)."""
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
            if not to.startswith("@") or to == "@all":
                raise UsageError("--anycast needs --to @capability (e.g. @builders)")
            from agentmaild.rules.queues import anycast_queue

            to = anycast_queue(store, the_mailer.expand(to, who)[0])
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


@app.command()
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


@limits_app.command("reset")
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


from agentmaild.cli import agents as cli_agents  # noqa: E402
from agentmaild.cli import ask as cli_ask  # noqa: E402
from agentmaild.cli import daemon as cli_daemon  # noqa: E402
from agentmaild.cli import dashboard as cli_dashboard  # noqa: E402
from agentmaild.cli import deliveries as cli_deliveries  # noqa: E402
from agentmaild.cli import hooks as cli_hooks  # noqa: E402
from agentmaild.cli import logs as cli_logs  # noqa: E402
from agentmaild.cli import read as cli_read  # noqa: E402
from agentmaild.cli import relay as cli_relay  # noqa: E402
from agentmaild.cli import service as cli_service  # noqa: E402
from agentmaild.cli import store as cli_store  # noqa: E402
from agentmaild.cli import tokens as cli_tokens  # noqa: E402
from agentmaild.cli import trust as cli_trust  # noqa: E402

cli_ask.register(app)
cli_read.register(app)
cli_agents.register(agents_app)
cli_daemon.register(app)
cli_dashboard.register(app)
cli_deliveries.register(app)
cli_logs.register(app)
cli_service.register(app)
cli_store.register(app)
cli_hooks.register(app)
cli_tokens.register(app)
cli_trust.register(app)
cli_relay.register(app)


def _show_help(exc: typer.TyperException) -> None:
    """A bare group (``agentmaild``, ``agentmaild agents``) asked for help, which is no error.

    With rich installed the help was printed while the exception was built and its message is
    empty; without rich the message is the help text.
    """
    text = exc.format_message()
    if text.strip():
        typer.echo(text)


def run() -> None:
    """Run the CLI; usage errors become one ``error:`` line (JSON with --json) and exit 2."""
    try:
        # Without standalone mode click returns the exit code of a typer.Exit instead of exiting.
        code = app(prog_name="agentmaild", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            _show_help(exc)
            sys.exit(0)
        if "--json" in sys.argv[1:]:
            typer.echo(
                json.dumps(
                    {"ok": False, "error": {"code": "usage", "message": exc.format_message()}}
                )
            )
        else:
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.echo(f"error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
