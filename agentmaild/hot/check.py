"""The hot path run by hooks on every prompt: ``check --inject``. No typer, structlog or asyncio.

``entry.main`` routes here only for argument shapes it fully understands; anything else goes to
the typer CLI, which implements the same command (slower to start, same behaviour). This module
talks to the store through its cold-path port (``store.ports``; on SQLite ``store.pull``, stdlib
only) so it never imports the models or dataclasses;
with ``AGENTMAIL_URL`` it asks the HTTP API instead (``http.client``) and never loads sqlite3.
"""

from __future__ import annotations

import json
import os
import sys

from agentmaild.errors import AgentmaildError, UnknownAgent, UsageError, report
from agentmaild.ids import check_name
from agentmaild.mail.vocab import IMPLICIT_RECIPIENTS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agentmaild.store.ports import Port

INJECT_MAX_CHARS = 10_000


def inject_options(got: tuple[str, dict[str, Any], dict[str, Any]] | None) -> dict[str, Any] | None:
    """The options of a ``check --inject`` command line as ``hot.argv`` read it (the root's
    ``--db``/``--json``/``--url``/``--token`` count as the command's own); else None."""
    if got is None or not got[0].endswith(":check") or not got[2]["inject"]:
        return None
    root, values = got[1], got[2]
    return {"agent": values["agent"], "db": values["db"] or root["db"],
            "url": values["url"] or root["url"], "token": values["token"] or root["token"],
            "json": values["as_json"] or root["as_json"]}  # fmt: skip


def take_and_render(
    port: Port, agent: str, *, max_chars: int = INJECT_MAX_CHARS
) -> tuple[str, list[str]]:
    """In one write: take the agent's unread mail, render what fits, ack just that
    (``Port.inject``). An Overstory pending-nudge banner beside the store leads the output."""
    from agentmaild.render import inject

    def render(
        rows: list[dict[str, Any]], unread: int, nudges: list[dict[str, Any]], lead: str
    ) -> tuple[str, list[str]]:
        return inject.fit_rows(rows, agent, unread, nudges, inject.plain, max_chars, lead)

    return port.inject(agent, max_chars, render)


def _is_known(port: Port, agent: str, path: str, overstory: bool) -> bool:
    """``store.checks.is_known`` over this path's lookups: registered or ever mailed (the port's
    one query), registered with Overstory (in Overstory mode), else the config's
    ``refuse_unknown_recipients`` as every other door honours it. The query answers the common
    case; ``checks`` and the config load only for a name it does not know."""
    if port.knows(agent):
        return True
    from agentmaild.store.checks import is_known

    def with_overstory() -> bool:
        if not overstory:
            return False
        from agentmaild.overstory.sessions import read_sessions, sessions_path

        return bool(read_sessions(sessions_path(path), agent))

    return is_known(agent, lookups=(with_overstory,), refuse_unknown=refuse_unknown_configured)


def refuse_unknown_configured() -> bool:
    """The config's ``limits.refuse_unknown_recipients``, loaded on the call (the hot paths ask
    only for a name nobody knows)."""
    from agentmaild.config import load_config

    return load_config().limits.refuse_unknown_recipients


def check_inject(agent: str | None, db: str | None) -> tuple[str, list[str]]:
    """``agent`` None: Overstory's default (``orchestrator``) in Overstory mode, else an error."""
    from agentmaild.overstory.flavor import ORCHESTRATOR, overstory_mode
    from agentmaild.store.kinds import open_port
    from agentmaild.store.location import resolve_location

    location = resolve_location(db)
    overstory = overstory_mode(location.target)
    if not agent:
        if not overstory:
            raise UsageError("check: --agent is required (or set AGENTMAIL_AGENT)")
        agent = ORCHESTRATOR
    check_name(agent, loose=overstory)
    implicit = agent in IMPLICIT_RECIPIENTS or (overstory and agent == ORCHESTRATOR)
    port = open_port(location)
    if port is None:  # no store yet: nobody was ever mailed
        if implicit:
            return "", []
        raise UnknownAgent(agent)
    try:
        text, ids = take_and_render(port, agent)
        if not ids and not implicit and not _is_known(port, agent, location.local, overstory):
            raise UnknownAgent(agent)
    finally:
        port.done()  # SQLite's stays open for entry's os._exit (no close-time checkpoint)
    return text, ids


def check_remote(remote: tuple[str, str | None], agent: str) -> tuple[str, list[str]]:
    """``check --inject`` through the HTTP API (``AGENTMAIL_URL``): the server takes and renders."""
    from agentmaild.http.client import call

    check_name(agent)
    answer = call(remote, "POST", "/v1/inbox/take", {"agent": agent, "inject": True})
    return str(answer.get("text") or ""), [str(i) for i in answer.get("acked") or []]


def run_check(opts: dict[str, Any]) -> int:
    """The ``check --inject`` that ``inject_options`` read: the text on stdout, acked."""
    as_json = bool(opts.get("json"))
    try:
        agent = opts.get("agent") or os.environ.get("AGENTMAIL_AGENT")
        db, url, token = opts.get("db"), opts.get("url"), opts.get("token")
        remote = None
        if url or os.environ.get("AGENTMAIL_URL"):
            from agentmaild.http.client import target

            remote = target(str(url) if url else None, str(token) if token else None)
        if remote is not None:
            if not agent:
                raise UsageError("check: --agent is required (or set AGENTMAIL_AGENT)")
            text, ids = check_remote(remote, str(agent))
        else:
            text, ids = check_inject(str(agent) if agent else None, str(db) if db else None)
    except AgentmaildError as exc:
        return report(exc, as_json)
    if as_json:
        sys.stdout.write(json.dumps({"ok": True, "acked": ids, "text": text}) + "\n")
    elif text and sys.stdout.isatty():
        # A human at a terminal, not a hook: show control characters rather than obey them.
        from agentmaild.render.framing import visible  # already loaded by inject

        sys.stdout.write(visible(text))
    elif text:
        sys.stdout.write(text)
    return 0
