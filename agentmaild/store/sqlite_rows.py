"""Row ↔ model mapping of the SQLite store (agents' JSON as text); messages map in ``rows``."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from agentmaild.models import Agent, DeadLetter


def agent_from_row(row: sqlite3.Row) -> Agent:
    return Agent(
        name=row["name"],
        capability=row["capability"],
        parent=row["parent"],
        state=row["state"],
        channel=row["channel"],
        command=tuple(json.loads(row["command"])) if row["command"] else None,
        cwd=row["cwd"],
        tmux_target=row["tmux_target"],
        tmux_socket=row["tmux_socket"],
        preset=row["preset"],
        session_id=row["session_id"],
        poll_interval_s=row["poll_interval_s"],
        settings=json.loads(row["settings"] or "{}"),
        turn_state=row["turn_state"],
        turn_state_at=row["turn_state_at"],
        shutdown_requested_at=row["shutdown_requested_at"],
        host=row["host"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def agent_params(agent: Agent) -> dict[str, Any]:
    """The named parameters of ``agent_insert`` and the agent update (command, settings as JSON)."""
    d = agent.to_dict()
    d["command"] = json.dumps(list(agent.command)) if agent.command is not None else None
    d["settings"] = json.dumps(agent.settings)
    return d


def dead_letter_from_row(row: sqlite3.Row, message_ids: tuple[str, ...]) -> DeadLetter:
    """A dead ``am_deliveries`` row and the ids of its messages."""
    return DeadLetter(
        delivery_id=row["id"],
        agent=row["agent"],
        message_ids=message_ids,
        attempts=row["attempts"],
        last_error=row["last_error"],
        dead_at=row["updated_at"],
    )
