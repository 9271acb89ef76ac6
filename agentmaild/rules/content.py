"""What a message may hold (type, priority, subject, body, payload under ``[limits]``), and the
``Draft`` of one send: its checked fields, made a row per recipient."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentmaild.config import LimitsConfig
from agentmaild.errors import ValidationError
from agentmaild.ids import new_id
from agentmaild.mail.vocab import MESSAGE_TYPES
from agentmaild.models import PRIORITY_RANK, Message

NUDGE_TYPES = frozenset({"worker_done", "merge_ready", "error", "escalation", "merge_failed"})


def _check_text(field: str, value: str) -> None:
    if "\x00" in value:
        raise ValidationError(f"{field}: contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{field}: not valid UTF-8 text") from exc


def check_content(
    limits: LimitsConfig, subject: str, body: str, msg_type: str, priority: str, payload: str | None
) -> str | None:
    """The payload made canonical, once every field passed; else a one-line ValidationError."""
    # Loaded only when a message is written: the CLI's start has no use for the payload schemas.
    from agentmaild.mail.payloads import validate_payload

    if msg_type not in MESSAGE_TYPES:
        raise ValidationError(f"type: unknown type {msg_type!r}; one of {', '.join(MESSAGE_TYPES)}")
    if priority not in PRIORITY_RANK:
        raise ValidationError(f"priority: unknown {priority!r}; one of low, normal, high, urgent")
    _check_text("subject", subject)
    _check_text("body", body)
    if not subject.strip():
        raise ValidationError("subject: must not be empty")
    if len(subject) > limits.subject_max_chars:
        raise ValidationError(
            f"subject: {len(subject)} characters, the limit is {limits.subject_max_chars}"
        )
    size = len(body.encode("utf-8"))
    if size > limits.body_max_bytes:
        raise ValidationError(f"body: {size} bytes, the limit is {limits.body_max_bytes}")
    return validate_payload(msg_type, payload, limits.payload_max_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Draft:
    """One send's checked fields, before they become a row per recipient."""

    sender: str
    to: str
    subject: str
    body: str
    type: str
    priority: str
    thread_id: str | None
    payload: str | None  # canonical JSON

    def messages(
        self, names: Sequence[str], stamp: str, broadcast_id: str | None
    ) -> tuple[Message, ...]:
        return tuple(
            Message(
                id=new_id("msg"),
                from_agent=self.sender,
                to_agent=name,
                subject=self.subject,
                body=self.body,
                type=self.type,
                priority=self.priority,
                thread_id=self.thread_id,
                payload=self.payload,
                created_at=stamp,
                broadcast_id=broadcast_id,
            )
            for name in names
        )

    def nudges(self, messages: Sequence[Message]) -> tuple[tuple[str, str, str], ...]:
        if self.priority in ("urgent", "high") or self.type in NUDGE_TYPES:
            return tuple((m.to_agent, m.id, f"{self.priority} {self.type}") for m in messages)
        return ()
