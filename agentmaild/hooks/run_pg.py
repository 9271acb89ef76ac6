"""The Claude Code hooks on a PostgreSQL store: UserPromptSubmit and SessionStart deliver the
agent's unread mail (taken, rendered and acked in one transaction by ``inject_pg``) and record the
turn state; the other events do nothing there yet.

Loaded only when the store is a DSN, so the SQLite hot path never imports psycopg.
"""

from __future__ import annotations

import re

from agentmaild.errors import NotFound
from agentmaild.hooks.io import output_limit
from agentmaild.hooks.run import HEADER_RE, Hook
from agentmaild.inject_pg import check_inject
from agentmaild.store.postgres import PostgresMailStore


def run_pg(hook: Hook, dsn: str) -> int:
    if hook.name == "UserPromptSubmit":
        _set_state(dsn, hook.agent, "busy")
        if re.findall(HEADER_RE, hook.text("prompt")):
            return 0  # the daemon put this mail into the prompt: nothing more to give
        return _deliver(hook, dsn)
    if hook.name == "SessionStart":
        if hook.text("source") != "compact":  # compaction fires mid-turn: still busy
            _set_state(dsn, hook.agent, "idle")
        return _deliver(hook, dsn)
    return 0


def _deliver(hook: Hook, dsn: str) -> int:
    if hook.quiet:  # a turn the daemon started: its mail came with the prompt
        return 0
    text, ids = check_inject(dsn, hook.agent, output_limit())
    if ids:
        hook.out.write(hook.context()(text).encode("utf-8"))
        hook.out.flush()
    return 0


def _set_state(dsn: str, agent: str, state: str) -> None:
    store = PostgresMailStore(dsn, create=False)
    try:
        store.update_agent(agent, {"turn_state": state})
    except NotFound:
        pass  # mail to a name that never registered: nothing to record
    finally:
        store.close()
