"""``agentmaild send`` and ``reply`` without typer: agents send mail many times a session, and the
CLI's start (typer, click, every command's module) cost them ~0.2-0.5 s a message against
~0.06 s for this path.

``entry.main`` routes here only the argument shapes parsed below (a store send or reply, each
option at most once, every value given); anything else (``--help``, ``--url``, ``--payload``, a
value that looks like an option, an unknown flag) goes to the typer command, which implements the
same send and prints the same output and errors. Both open, send and poke through
``agentmaild.hot.access``.
"""

from __future__ import annotations

import json
import os
import sys

from agentmaild.errors import AgentmaildError, report

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentmaild.mail.mailer import Sent

# option spellings → the field each sets (the typer commands' names and short forms)
_COMMON = {
    "--body": "body", "-b": "body", "--from": "sender", "--agent": "sender", "--type": "type",
    "-t": "type", "--priority": "priority", "-p": "priority", "--db": "db",
}  # fmt: skip
_OPTIONS = {
    "send": {**_COMMON, "--to": "to", "--subject": "subject", "-s": "subject",
             "--thread": "thread"},
    "reply": _COMMON,
}  # fmt: skip
# what each command cannot do without (typer's usage error otherwise); ``id``: reply's argument
_REQUIRED = {"send": ("to", "subject"), "reply": ("id", "body")}


def parse_send(argv: Sequence[str], command: str = "send") -> dict[str, str | bool] | None:
    """``send`` or ``reply`` options (after the command's word) as fields, or None when the typer
    command should parse them (it owns every other shape, and every usage error)."""
    options = _OPTIONS[command]
    opts: dict[str, str | bool] = {}
    it = iter(argv)
    for arg in it:
        value: str | bool | None
        if arg == "--json" or (command == "reply" and not arg.startswith("-")):
            field, value = ("json", True) if arg == "--json" else ("id", arg)  # reply's message
        else:
            name, eq, given = arg.partition("=") if arg.startswith("--") else (arg, "", "")
            field, got = options.get(name, ""), given if eq else next(it, None)
            if not field or got is None or (got.startswith("-") and got != "-"):
                return None  # unknown, no value, or a value that click may read as an option
            value = got
        if field in opts:
            return None  # given twice
        opts[field] = value
    if any(f not in opts for f in _REQUIRED[command]) or os.environ.get("AGENTMAIL_URL"):
        return None  # typer's usage error; the HTTP API's send
    return opts


def run_send(argv: Sequence[str], command: str = "send") -> int:
    """The send or reply ``parse_send`` accepted: ids (or ``--json``) on stdout, an error line
    and exit 1 (2 for usage) as the typer command gives."""
    opts = parse_send(argv, command) or {}
    as_json = bool(opts.get("json"))
    try:
        sent = _send(command, {k: v for k, v in opts.items() if isinstance(v, str)})
    except AgentmaildError as exc:
        return report(exc, as_json)
    if as_json:
        sys.stdout.write(json.dumps(sent.to_dict(), ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("\n".join(sent.ids) + "\n")
    return 0


def _send(command: str, opts: dict[str, str]) -> Sent:
    from agentmaild.hot.access import check_priority, mailer, poke, read_body, sender_of, store_at
    from agentmaild.store.location import resolve_location

    check_priority(opts.get("priority"))
    store = store_at(resolve_location(opts.get("db")))
    try:
        if command == "reply":
            sent = mailer(store).reply(
                opts["id"],
                sender=sender_of(opts.get("sender"), store),
                body=read_body(opts["body"]),
                type=opts.get("type"),
                priority=opts.get("priority"),
            )
        else:
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
