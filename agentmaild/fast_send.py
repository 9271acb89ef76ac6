"""``agentmaild send`` without typer: agents send mail many times a session, and the CLI's start
(typer, click, every command's module) cost them ~0.4 s a send against ~0.1 s for this path.

``entry.main`` routes here only the argument shapes parsed below (a store send, each option at
most once, every value given); anything else (``--help``, ``--url``, ``--payload``, a value that
looks like an option, an unknown flag) goes to the typer command, which implements the same send
and prints the same output and errors. Both open, send and poke through ``agentmaild.access``.
"""

from __future__ import annotations

import json
import os
import sys

from agentmaild.errors import AgentmaildError, UsageError, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentmaild.mail import Sent

# option spellings → the field each sets (the typer command's names and short forms)
_OPTIONS = {
    "--to": "to", "--subject": "subject", "-s": "subject", "--body": "body", "-b": "body",
    "--from": "sender", "--agent": "sender", "--type": "type", "-t": "type",
    "--priority": "priority", "-p": "priority", "--thread": "thread", "--db": "db",
}  # fmt: skip


def parse_send(argv: Sequence[str]) -> dict[str, str | bool] | None:
    """``send`` options (after the word ``send``) as fields, or None when the typer command
    should parse them (it owns every other shape, and every usage error)."""
    opts: dict[str, str | bool] = {}
    it = iter(argv)
    for arg in it:
        if arg == "--json":
            if "json" in opts:
                return None
            opts["json"] = True
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        field = _OPTIONS.get(name)
        if field is None or field in opts:
            return None
        if not eq:
            got = next(it, None)
            if got is None:
                return None
            value = got
        if value.startswith("-") and value != "-":  # an option, or a value click may read so
            return None
        opts[field] = value
    if "to" not in opts or "subject" not in opts or os.environ.get("AGENTMAIL_URL"):
        return None  # typer's usage error; the HTTP API's send
    return opts


def run_send(argv: Sequence[str]) -> int:
    """The send ``parse_send`` accepted: ids (or ``--json``) on stdout, an error line and exit 1
    (2 for usage) as the typer command gives."""
    opts = parse_send(argv) or {}
    as_json = bool(opts.get("json"))
    try:
        sent = _send({k: v for k, v in opts.items() if isinstance(v, str)})
    except AgentmaildError as exc:
        if as_json:
            sys.stdout.write(json.dumps(exc.to_json()) + "\n")
        else:
            sys.stderr.write(f"error: {one_line(exc.message)}\n")
        return 2 if isinstance(exc, UsageError) else 1
    if as_json:
        sys.stdout.write(json.dumps(sent.to_dict(), ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("\n".join(sent.ids) + "\n")
    return 0


def _send(opts: dict[str, str]) -> Sent:
    from agentmaild.access import mailer, poke, read_body, sender_of, store_at
    from agentmaild.location import resolve_db_str

    store = store_at(resolve_db_str(opts.get("db")))
    try:
        sent = mailer(store).send(
            sender=sender_of(opts.get("sender"), store),
            to=opts["to"],
            subject=opts["subject"],
            body=read_body(opts.get("body", "")),
            type=opts.get("type", "status"),
            priority=opts.get("priority", "normal"),
            thread_id=opts.get("thread"),
        )
        if not sent.duplicate:
            poke(store, sorted({m.to_agent for m in sent.messages}))
    finally:
        store.close()
    return sent
