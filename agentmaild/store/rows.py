"""Row ↔ model mapping shared by both stores (a row of either driver, read by column name):
messages and dead letters. Agents, whose JSON columns the dialect decodes, map in ``agents``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentmaild.models import Batch, DeadLetter, Message
from agentmaild.store.connector import Row


def message_from_row(row: Row, *, delivery_id: str | None = None) -> Message:
    """The message of ``row``; with ``delivery_id``, as that delivery is about to claim it.
    A row without the delivery columns (a narrower SELECT) leaves them None."""
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


def batch_of(
    delivery_id: str, agent: str, messages: list[Message], attempt: int, lease_until: float
) -> Batch:
    """A claimed batch. A message read by its delivery (a redelivery) or for it (a claim of new
    mail) is kept as it is; ``replace`` copies a frozen dataclass field by field (~16 µs)."""
    return Batch(
        delivery_id=delivery_id,
        agent=agent,
        messages=tuple(
            m if m.delivery_id == delivery_id else replace(m, delivery_id=delivery_id)
            for m in messages
        ),
        attempt=attempt,
        lease_until=lease_until,
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


def dead_letter_from_row(row: Row, message_ids: tuple[str, ...] | None = None) -> DeadLetter:
    """A dead ``am_deliveries`` row and the ids of its messages: given, or the row's own
    ``message_ids`` column (PostgreSQL's ``dead_list`` aggregates them)."""
    return DeadLetter(
        delivery_id=row["id"],
        agent=row["agent"],
        message_ids=message_ids if message_ids is not None else tuple(row["message_ids"]),
        attempts=row["attempts"],
        last_error=row["last_error"],
        dead_at=row["updated_at"],
    )
