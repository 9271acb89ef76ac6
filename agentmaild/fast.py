"""The hot path run by hooks on every prompt: ``check --inject``. No typer, structlog or asyncio.

``entry.main`` routes here only for argument shapes it fully understands; anything else goes to
the typer CLI, which implements the same command (slower to start, same behaviour). This module
talks to SQLite directly through ``store.pull`` so it never imports the models or dataclasses;
with ``AGENTMAIL_URL`` it asks the HTTP API instead (``http.client``) and never loads sqlite3.
"""

from __future__ import annotations

import json
import os
import sys

from agentmaild.errors import AgentmaildError, StoreError, UnknownAgent, UsageError, report
from agentmaild.ids import check_name
from agentmaild.vocab import IMPLICIT_RECIPIENTS

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

INJECT_MAX_CHARS = 10_000


def parse_check(argv: Sequence[str]) -> dict[str, str | bool | None] | None:
    """``check --inject [--agent X] [--db P] [--url U] [--token T] [--json]``; None when argv
    holds anything else."""
    opts: dict[str, str | bool | None] = {
        "inject": False, "json": False, "agent": None, "db": None, "url": None, "token": None,
    }  # fmt: skip
    it = iter(argv)
    for arg in it:
        if arg in ("--inject", "--json"):
            opts[arg[2:]] = True
        elif arg in ("--agent", "--db", "--url", "--token"):
            value = next(it, None)
            if value is None:
                return None
            opts[arg[2:]] = value
        elif arg.startswith(("--agent=", "--db=", "--url=", "--token=")):
            key, value = arg[2:].split("=", 1)
            opts[key] = value
        else:
            return None
    return opts if opts["inject"] else None


def _open(path: str) -> sqlite3.Connection:
    """A connection to the existing store at ``path`` (callers never create it here: the file
    exists, so SQLite gives the WAL and shared-memory files its 0600 mode)."""
    import sqlite3  # here, not at the top: ``check --inject`` over HTTP never needs it

    from agentmaild.store.migrate import SCHEMA_VERSION

    links = _links(path)
    if links > 1:  # SQLite finds the WAL by name: a second name means a second WAL
        from agentmaild.store.files import hard_link_error

        raise hard_link_error(path, links)
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint = 10000")  # = store.sqlite.SENDER_AUTOCHECKPOINT_PAGES
    if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
        # An old or Overstory-only file: let the full store run its migration once.
        conn.close()
        from agentmaild.store.sqlite import SqliteMailStore

        SqliteMailStore(path).close()
        return _open(path)
    conn.row_factory = sqlite3.Row
    return conn


def _links(path: str) -> int:
    """Hard links of the store file (1 for anything that is not a regular file)."""
    try:
        st = os.stat(path)
    except OSError:
        return 1
    return st.st_nlink if st.st_mode & 0o170000 == 0o100000 else 1  # S_ISREG, without `stat`


def take_and_render(
    conn: sqlite3.Connection, agent: str, *, max_chars: int = INJECT_MAX_CHARS, db: str = ""
) -> tuple[str, list[str]]:
    """In one write transaction: take the agent's unread mail, render what fits, ack just that.

    With mail to show, an Overstory pending-nudge file next to the store ``db`` is taken too and
    its banner leads the output (``overstory.nudges``).
    """
    from agentmaild import inject
    from agentmaild.overstory.nudges import take_banner
    from agentmaild.store import pull

    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = pull.take_unread_rows(conn, agent, max_chars - 2500)
        if not rows:
            conn.execute("COMMIT")
            return "", []
        lead = take_banner(conn, db, agent, [r["id"] for r in rows]) if db else ""
        # Rendered (with the banner of these messages) before the ack drops their nudges.
        text, ids = inject.fit(conn, agent, rows, inject.plain, max_chars, lead)
        pull.mark_read(conn, ids, "pull")
        pull.mark_reached(conn, agent)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return text, ids


def _is_known(conn: sqlite3.Connection, agent: str, path: str, overstory: bool) -> bool:
    """``store.checks.is_known`` over this path's lookups: registered or ever mailed (one query),
    registered with Overstory (in Overstory mode), else the config's
    ``refuse_unknown_recipients`` as every other door honours it. The query answers the common
    case; ``checks`` and the config load only for a name it does not know."""
    sql = (
        "SELECT EXISTS (SELECT 1 FROM am_agents WHERE name = ?1)"
        " OR EXISTS (SELECT 1 FROM messages WHERE to_agent = ?1)"
    )
    if conn.execute(sql, (agent,)).fetchone()[0]:
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
    import sqlite3

    from agentmaild.location import resolve_db_str
    from agentmaild.overstory.flavor import ORCHESTRATOR, overstory_mode

    path = resolve_db_str(db)
    if path.startswith(("postgresql://", "postgres://")):  # = location.is_dsn, inlined
        from agentmaild.inject_pg import check_inject as check_inject_pg

        if not agent:
            raise UsageError("check: --agent is required (or set AGENTMAIL_AGENT)")
        check_name(agent)
        return check_inject_pg(path, agent, INJECT_MAX_CHARS)
    overstory = overstory_mode(path)
    if not agent:
        if not overstory:
            raise UsageError("check: --agent is required (or set AGENTMAIL_AGENT)")
        agent = ORCHESTRATOR
    check_name(agent, loose=overstory)
    implicit = agent in IMPLICIT_RECIPIENTS or (overstory and agent == ORCHESTRATOR)
    if not os.path.exists(path):
        if implicit:
            return "", []
        raise UnknownAgent(agent)
    try:
        # Not closed here: entry.py ends the process with os._exit, skipping the checkpoint that
        # closing the last connection would run (see entry._exit_now).
        conn = _open(path)
        text, ids = take_and_render(conn, agent, db=path)
        if not ids and not implicit and not _is_known(conn, agent, path, overstory):
            raise UnknownAgent(agent)
    except sqlite3.Error as exc:
        if os.path.isdir(path):
            raise StoreError(f"{path}: is a directory, not a store file") from exc
        raise StoreError(f"store {path}: {exc}") from exc
    return text, ids


def check_remote(remote: tuple[str, str | None], agent: str) -> tuple[str, list[str]]:
    """``check --inject`` through the HTTP API (``AGENTMAIL_URL``): the server takes and renders."""
    from agentmaild.http.client import call

    check_name(agent)
    answer = call(remote, "POST", "/v1/inbox/take", {"agent": agent, "inject": True})
    return str(answer.get("text") or ""), [str(i) for i in answer.get("acked") or []]


def run_check(argv: Sequence[str]) -> int:
    opts = parse_check(argv) or {}
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
        from agentmaild.render import visible  # already loaded by inject

        sys.stdout.write(visible(text))
    elif text:
        sys.stdout.write(text)
    return 0
