"""Reads Overstory's agent registry, ``sessions.db`` (table ``sessions``), next to the store.

Only the columns agentmaild needs are read (``agent_name``, ``capability``, ``state``,
``parent_agent``), so an Overstory that adds columns changes nothing. The file is opened read-only
and never created or written: it is Overstory's. Stdlib only (the hook path asks "is this agent
known?" when it has no mail to show).
"""

from __future__ import annotations

import os
import sqlite3

from agentmaild.errors import StoreError

SESSIONS_FILE = "sessions.db"
# Overstory's states → ours. Its turn states mean the agent is up; completed/zombie are terminal.
STATE_MAP = {
    "booting": "booting",
    "working": "working",
    "in_turn": "working",
    "between_turns": "idle",
    "stalled": "stalled",
    "completed": "completed",
    "zombie": "zombie",
}


def sessions_path(db: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(db)), SESSIONS_FILE)


def read_sessions(path: str, name: str | None = None) -> list[tuple[str, str, str, str | None]]:
    """``(name, capability, state, parent)`` rows, our state names; [] when there is no registry.

    ``name`` reads just that agent. A state we do not know is passed through unchanged (it is
    not terminal, so the agent stays a recipient).
    """
    if not os.path.isfile(path):
        return []
    sql = "SELECT agent_name, capability, state, parent_agent FROM sessions"
    params: tuple[str, ...] = ()
    if name is not None:
        sql, params = sql + " WHERE agent_name = ?", (name,)
    try:
        # mode=ro: never create or migrate Overstory's file; it stays in WAL mode for Overstory.
        conn = sqlite3.connect(f"file:{_uri(path)}?mode=ro", uri=True, timeout=5.0)
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            rows = conn.execute(sql + " ORDER BY agent_name", params).fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc) or "no such column" in str(exc):
            return []  # an Overstory that has not set its registry up yet
        raise StoreError(f"cannot read Overstory's registry {path}: {exc}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read Overstory's registry {path}: {exc}") from exc
    return [(str(n), str(c), STATE_MAP.get(str(s), str(s)), p) for n, c, s, p in rows]


def _uri(path: str) -> str:
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
