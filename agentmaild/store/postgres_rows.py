"""Row ↔ model mapping of the PostgreSQL store (jsonb arrives decoded); messages map in ``rows``."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from agentmaild.models import Agent, DeadLetter
from agentmaild.store.postgres_tx import Row


def agent_from_row(row: Row) -> Agent:
    return Agent(
        name=row["name"],
        capability=row["capability"],
        parent=row["parent"],
        state=row["state"],
        channel=row["channel"],
        command=tuple(row["command"]) if row["command"] is not None else None,
        cwd=row["cwd"],
        tmux_target=row["tmux_target"],
        tmux_socket=row["tmux_socket"],
        preset=row["preset"],
        session_id=row["session_id"],
        poll_interval_s=row["poll_interval_s"],
        settings=dict(row["settings"] or {}),
        turn_state=row["turn_state"],
        turn_state_at=row["turn_state_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        shutdown_requested_at=row.get("shutdown_requested_at"),
        host=row.get("host"),
    )


def agent_params(agent: Agent) -> dict[str, Any]:
    """The named parameters of ``agent_insert`` and the agent update (command, settings jsonb)."""
    d = agent.to_dict()
    d["command"] = Jsonb(list(agent.command)) if agent.command is not None else None
    d["settings"] = Jsonb(agent.settings)
    return d


def dead_letter_from_row(row: Row) -> DeadLetter:
    """A dead ``am_deliveries`` row with the ids of its messages (``message_ids``)."""
    return DeadLetter(
        delivery_id=row["id"],
        agent=row["agent"],
        message_ids=tuple(row["message_ids"]),
        attempts=row["attempts"],
        last_error=row["last_error"],
        dead_at=row["updated_at"],
    )
