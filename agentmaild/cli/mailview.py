"""How mail looks on the CLI: one line per message (probe, list) and whole messages (read,
check, thread), alike whether the mail came from the store or from the HTTP API."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentmaild.models import Message


def summary_line(row: dict[str, Any], chars: int) -> str:
    """``row`` is ``Message.summary()`` (with ``origin`` for peer mail); ``chars`` the body's
    length."""
    flag = " " if row["read"] else "*"
    origin = row.get("origin")
    return (
        f"{flag} {row['id']}  {row['created_at']}  {row['from']} -> {row['to']}  "
        f"[{row['type']}/{row['priority']}]  {json.dumps(row['subject'], ensure_ascii=False)}  "
        f"({chars} chars)" + (f"  verified: {_origin(origin)}" if origin else "")
    )


def _origin(origin: Mapping[str, Any]) -> str:
    return f"peer {origin['peer']}, key {origin['key_id']}, their id {origin['origin_id']}"


def summaries_text(rows: Sequence[dict[str, Any]], found: Sequence[Message]) -> str:
    """The probe lines of ``found``, whose JSON ``rows`` are ``with_origins(…, whole=False)``."""
    return "\n".join(summary_line(r, len(m.body)) for r, m in zip(rows, found, strict=True))


def messages_text(rows: Sequence[dict[str, Any]], found: Sequence[Message] | None = None) -> str:
    """Whole messages, from their JSON ``rows`` (``with_origins(…, whole=True)`` or the API's
    answer); ``found``: the messages themselves, when the rows came from the store."""
    found = [from_api(r) for r in rows] if found is None else found
    return "\n\n".join(full(m, r.get("origin")) for r, m in zip(rows, found, strict=True))


def full(m: Message, origin: Mapping[str, Any] | None = None) -> str:
    lines = [
        f"id:       {m.id}",
        f"from:     {m.from_agent}",
        *([f"origin:   verified: {_origin(origin)}"] if origin else []),
        f"to:       {m.to_agent}",
        f"subject:  {json.dumps(m.subject, ensure_ascii=False)}",
        f"type:     {m.type}",
        f"priority: {m.priority}",
        f"thread:   {m.thread_id or '-'}",
        f"sent:     {m.created_at}",
        f"read:     {'yes' if m.read else 'no'}",
    ]
    if m.acked_at or m.acked_by:
        lines.append(f"acked:    {m.acked_at or '-'} by {m.acked_by or '-'}")
    if m.delivery_id:
        lines.append(f"delivery: {m.delivery_id}")
    if m.payload:
        lines.append(f"payload:  {m.payload}")
    return "\n".join(lines) + "\n\n" + m.body


def from_api(d: dict[str, Any]) -> Message:
    """A ``Message.to_dict()`` the API sent back, as the Message it was (payload re-serialised
    the way ``payloads`` canonicalises it)."""
    payload = d.get("payload")
    return Message(
        id=d["id"],
        from_agent=d["from"],
        to_agent=d["to"],
        subject=d["subject"],
        body=d.get("body", ""),
        type=d["type"],
        priority=d["priority"],
        thread_id=d.get("thread_id"),
        payload=None
        if payload is None
        else json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
        read=bool(d["read"]),
        created_at=d["created_at"],
        broadcast_id=d.get("broadcast_id"),
        delivery_id=d.get("delivery_id"),
        acked_at=d.get("acked_at"),
        acked_by=d.get("acked_by"),
    )


def without_length(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API's probe rows as the local ``--json`` prints them (no ``body_length``)."""
    return [{k: v for k, v in r.items() if k != "body_length"} for r in rows]
