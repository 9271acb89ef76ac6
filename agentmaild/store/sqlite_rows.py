"""Row ↔ model mapping of the SQLite store: every conversion between ``sqlite3.Row`` and a model."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from agentmaild.models import Agent, DeadLetter, Message


def message_from_row(row: sqlite3.Row, *, delivery_id: str | None = None) -> Message:
    """The message of ``row``; with ``delivery_id``, as that delivery is about to claim it."""
    keys = row.keys()
    return Message(
        id=row["id"],
        from_agent=row["from_agent"],
        to_agent=row["to_agent"],
        subject=row["subject"],
        body=row["body"],
        type=row["type"],
        priority=row["priority"],
        thread_id=row["thread_id"],
        payload=row["payload"],
        read=bool(row["read"]),
        created_at=row["created_at"],
        broadcast_id=row["broadcast_id"] if "broadcast_id" in keys else None,
        delivery_id=delivery_id or (row["delivery_id"] if "delivery_id" in keys else None),
        acked_at=row["acked_at"] if "acked_at" in keys else None,
        acked_by=row["acked_by"] if "acked_by" in keys else None,
    )


def message_params(m: Message) -> dict[str, Any]:
    """The named parameters of the ``insert_message`` query."""
    return {
        "id": m.id,
        "from_agent": m.from_agent,
        "to_agent": m.to_agent,
        "subject": m.subject,
        "body": m.body,
        "type": m.type,
        "priority": m.priority,
        "thread_id": m.thread_id,
        "payload": m.payload,
        "created_at": m.created_at,
        "broadcast_id": m.broadcast_id,
    }


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
