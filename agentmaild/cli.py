"""The typer CLI: parse, call the mail rules or the store, print, map errors to exit codes.

Errors print one line, ``error: …``, on stderr and exit 1 (usage errors exit 2); with ``--json``
the error is ``{"ok": false, "error": {"code", "message"}}`` on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

import typer

from agentmaild import __version__
from agentmaild.cli_common import (
    STATE,
    DbOpt,
    FromOpt,
    JsonOpt,
    command,
    db_path,
    emit_error,
    mailer,
    open_store,
    out,
    poke,
    sender_of,
)
from agentmaild.errors import ValidationError
from agentmaild.ids import check_message_id, check_name, iso_now
from agentmaild.mail import Mailer
from agentmaild.models import Message

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


def _line(m: Message) -> str:
    flag = " " if m.read else "*"
    return (
        f"{flag} {m.id}  {m.created_at}  {m.from_agent} -> {m.to_agent}  "
        f"[{m.type}/{m.priority}]  {json.dumps(m.subject, ensure_ascii=False)}  ({m.size} chars)"
    )


def _full(m: Message) -> str:
    lines = [
        f"id:       {m.id}",
        f"from:     {m.from_agent}",
        f"to:       {m.to_agent}",
        f"subject:  {json.dumps(m.subject, ensure_ascii=False)}",
        f"type:     {m.type}",
        f"priority: {m.priority}",
        f"thread:   {m.thread_id or '-'}",
        f"sent:     {m.created_at}",
        f"read:     {'yes' if m.read else 'no'}",
    ]
    if m.payload:
        lines.append(f"payload:  {m.payload}")
    return "\n".join(lines) + "\n\n" + m.body


def _read_body(body: str) -> str:
    if body != "-":
        return body
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"body: stdin is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from exc


@app.callback()
def main_options(
    db: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output for every command.")] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    """Mail for teams of AI coding agents. Store: one SQLite file per project."""
    if version:
        typer.echo(f"agentmaild {__version__}")
        raise typer.Exit(0)
    STATE.db = db
    STATE.json = as_json


# -- sending --------------------------------------------------------------------------------
@app.command()
@command
def send(
    to: Annotated[str, typer.Option("--to", help="Recipient name, or a group: @all, @builders, …")],
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
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a message; one row per recipient, in one transaction. Prints the id(s)."""
    with open_store(db) as store:
        sent = mailer(store).send(
            sender=sender_of(sender),
            to=to,
            subject=subject,
            body=_read_body(body),
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
    as_json: JsonOpt = False,
) -> None:
    """Reply in the thread: to the original sender (or, from the sender, to the recipient)."""
    with open_store(db) as store:
        sent = mailer(store).reply(
            message_id,
            sender=sender_of(sender),
            body=_read_body(body),
            type=type,
            priority=priority,
            payload=payload,
            idempotency_key=idempotency_key,
        )
        if not sent.duplicate:
            poke(store, [m.to_agent for m in sent.messages])
    out(sent.to_dict(), as_json, lambda: typer.echo("\n".join(sent.ids)))


# -- reading --------------------------------------------------------------------------------
AgentOpt = Annotated[str, typer.Option("--agent", "-a", help="Whose mail.")]


@app.command()
@command
def inbox(
    agent: AgentOpt,
    unread: Annotated[bool, typer.Option("--unread", help="Unread only.")] = False,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Probe: list an agent's mail, metadata only (no bodies, no state change)."""
    check_name(agent)
    with open_store(db) as store:
        found = store.inbox(agent, unread_only=unread)
    out(
        {"ok": True, "agent": agent, "messages": [m.summary() for m in found]},
        as_json,
        lambda: typer.echo("\n".join(_line(m) for m in found) or f"no mail for {agent}"),
    )


@app.command("read")
@command
def read_cmd(
    message_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fetch one whole message. Does not mark it read (use `ack`)."""
    check_message_id(message_id)
    with open_store(db) as store:
        m = Mailer(store).get(message_id)
    out({"ok": True, "message": m.to_dict()}, as_json, lambda: typer.echo(_full(m)))


@app.command()
@command
def ack(
    message_ids: Annotated[
        list[str], typer.Argument(metavar="ID...", help="Messages to mark read.")
    ],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mark messages read. Unknown or already-read ids are reported, not errors."""
    for mid in message_ids:
        check_message_id(mid)
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


@app.command()
@command
def check(
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Default: $AGENTMAIL_AGENT.")
    ] = None,
    inject: Annotated[
        bool, typer.Option("--inject", help="Print as context for an agent (hooks).")
    ] = False,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fetch all unread mail for an agent and mark it read (priority first)."""
    from agentmaild import fast

    name = check_name(agent or os.environ.get("AGENTMAIL_AGENT") or "", "agent (--agent)")
    with open_store(db) as store:
        if inject:
            text, ids = fast.take_and_render(store.connection, name)
            out(
                {"ok": True, "acked": ids, "text": text},
                as_json,
                lambda: typer.echo(text, nl=False),
            )
            return
        found = store.take_unread(name)
    out(
        {"ok": True, "agent": name, "messages": [m.to_dict() for m in found]},
        as_json,
        lambda: typer.echo("\n\n".join(_full(m) for m in found) or f"no unread mail for {name}"),
    )


@app.command("list")
@command
def list_cmd(
    sender: Annotated[str | None, typer.Option("--from")] = None,
    to: Annotated[str | None, typer.Option("--to")] = None,
    type: Annotated[str | None, typer.Option("--type", "-t")] = None,
    unread: Annotated[bool, typer.Option("--unread")] = False,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="At most this many, newest first.")
    ] = 50,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List messages, newest first, with filters."""
    with open_store(db) as store:
        found = store.list_messages(
            from_agent=sender, to_agent=to, type=type, unread=True if unread else None, limit=limit
        )
    out(
        {"ok": True, "messages": [m.summary() for m in found]},
        as_json,
        lambda: typer.echo("\n".join(_line(m) for m in found) or "no messages"),
    )


@app.command()
@command
def thread(
    message_id: Annotated[
        str, typer.Argument(metavar="ID", help="A thread id or any message in it.")
    ],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a whole thread, oldest first."""
    check_message_id(message_id)
    with open_store(db) as store:
        root = store.get_message(message_id)
        found = store.thread(root.thread_id or root.id if root else message_id)
    if not found:
        raise typer.Exit(_not_found(f"no thread {message_id}", as_json))
    out(
        {"ok": True, "messages": [m.to_dict() for m in found]},
        as_json,
        lambda: typer.echo("\n\n".join(_full(m) for m in found)),
    )


def _not_found(message: str, as_json: bool) -> int:
    from agentmaild.errors import NotFound

    emit_error(NotFound(message), as_json or STATE.json)
    return 1


@app.command()
@command
def purge(
    days: Annotated[float | None, typer.Option("--days", min=0, help="Older than N days.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="To or from this agent.")] = None,
    everything: Annotated[bool, typer.Option("--all", help="Every message.")] = False,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete messages: at least one of --days, --agent, --all."""
    if days is None and agent is None and not everything:
        raise ValidationError("purge: give at least one of --days N, --agent X, --all")
    cutoff = None
    if days is not None:
        cutoff = iso_now((datetime.now(UTC) - timedelta(days=days)).timestamp())
    if agent is not None:
        check_name(agent)
    with open_store(db) as store:
        n = store.purge(older_than=cutoff, agent=agent, everything=everything)
    out({"ok": True, "deleted": n}, as_json, lambda: typer.echo(f"deleted {n} message(s)"))


@limits_app.command("reset")
@command
def limits_reset(
    sender: Annotated[str, typer.Option("--from", help="Sender of the pair.")],
    to: Annotated[str, typer.Option("--to", help="Recipient of the pair.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Clear the rate-limit window of one from→to pair."""
    check_name(sender, "sender")
    check_name(to, "recipient")
    with open_store(db) as store:
        n = store.reset_rate_limit(sender, to)
    out(
        {"ok": True, "cleared": n},
        as_json,
        lambda: typer.echo(f"cleared {n} entries for {sender}→{to}"),
    )


service_app = typer.Typer(help="Run agentmaild as a user service.", no_args_is_help=True)
app.add_typer(service_app, name="service")


@service_app.command("install")
@command
def service_install(
    systemd: Annotated[
        bool, typer.Option("--systemd", help="A systemd user unit (Linux default).")
    ] = False,
    launchd: Annotated[
        bool, typer.Option("--launchd", help="A launchd agent (macOS default).")
    ] = False,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the file; write nothing.")
    ] = False,
    config: Annotated[
        str | None, typer.Option("--config", help="Config file the service uses.")
    ] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Install (or print) the service file that runs `agentmaild serve` for this store."""
    from pathlib import Path

    from agentmaild.config import load_config
    from agentmaild.service import install_service

    if systemd and launchd:
        raise ValidationError("choose one of --systemd and --launchd")
    kind: Literal["systemd", "launchd"] = "systemd"
    if launchd or (not systemd and sys.platform == "darwin"):
        kind = "launchd"
    cfg_path = Path(config).expanduser() if config else None
    cfg = load_config(cfg_path)
    result = install_service(
        kind,
        print_only,
        db=db_path(db),
        config=cfg_path,
        workdir=Path.cwd(),
        shutdown_grace_s=cfg.daemon.shutdown_grace_s,
    )
    data = {
        "ok": True,
        "kind": kind,
        "path": str(result.path) if result.path else None,
        "next_steps": list(result.next_steps),
        "text": result.text,
    }

    def human() -> None:
        if result.path is None:
            typer.echo(result.text, nl=False)
        else:
            typer.echo(f"wrote {result.path}\nnext:\n  " + "\n  ".join(result.next_steps))

    out(data, as_json, human)


from agentmaild import cli_agents, cli_hooks  # noqa: E402  (registers the `agents` commands on agents_app)

cli_agents.register(agents_app)
try:
    from agentmaild import cli_daemon
except ImportError:  # pragma: no cover - during bring-up only
    cli_daemon = None  # type: ignore[assignment]
if cli_daemon is not None:
    cli_daemon.register(app)
cli_hooks.register(app)


def run() -> None:
    """Run the CLI; usage errors become one ``error:`` line (JSON with --json) and exit 2."""
    try:
        # Without standalone mode click returns the exit code of a typer.Exit instead of exiting.
        code = app(prog_name="agentmaild", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:
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
