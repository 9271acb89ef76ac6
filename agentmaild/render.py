"""Renders mail as the text an agent reads: batches, the PRIORITY banner, hook output caps.

Stdlib only: the hook and ``check --inject`` fast paths import it on every prompt.
"""

from __future__ import annotations

import json

from agentmaild.vocab import PROTOCOL_TYPES

# Spelled this way so the hook path never imports typing (mypy still checks the block).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Protocol

PROTOCOL = frozenset(PROTOCOL_TYPES)


if TYPE_CHECKING:

    class MessageLike(Protocol):
        @property
        def id(self) -> str: ...
        @property
        def from_agent(self) -> str: ...
        @property
        def subject(self) -> str: ...
        @property
        def body(self) -> str: ...
        @property
        def type(self) -> str: ...
        @property
        def priority(self) -> str: ...
        @property
        def thread_id(self) -> str | None: ...
        @property
        def payload(self) -> str | None: ...
        @property
        def created_at(self) -> str: ...


_VISIBLE: dict[int, str] = {}


def visible(text: str) -> str:
    """``text`` for a terminal: control characters other than newline and tab spelled ``\\xNN``.

    Mail is written by other agents; printed raw, ESC/OSC/CSI sequences in it could set the
    clipboard (OSC 52), retitle the window, clear the screen, or hide text behind a carriage
    return. Only a human's terminal gets this form; agents get the bytes as sent.
    """
    if not _VISIBLE:  # built on first use: the hook path imports this module and never calls it
        controls = [*range(0x20), *range(0x7F, 0xA0)]
        _VISIBLE.update({c: f"\\x{c:02x}" for c in controls if c not in (0x0A, 0x09)})
    return text.translate(_VISIBLE)


def _q(value: str) -> str:
    """Metadata goes out JSON-quoted, so a crafted subject cannot start a fake field line."""
    return json.dumps(value, ensure_ascii=False)


def render_message(m: MessageLike, index: int, total: int, *, body_limit: int = 0) -> str:
    body = m.body
    if body_limit and len(body) > body_limit:
        body = body[:body_limit] + f"\n[... truncated; run `agentmaild read {m.id}` for the rest]"
    lines = [
        f"--- message {index}/{total}: {m.id} ---",
        f"from: {_q(m.from_agent)}",
        f"type: {m.type}  priority: {m.priority}  sent: {m.created_at}",
        f"subject: {_q(m.subject)}",
    ]
    if m.thread_id:
        lines.append(f"thread: {m.thread_id}")
    if m.payload and m.type in PROTOCOL:
        lines.append(f"payload: {m.payload}")
    # The body is delimited by the message id, which its author could not know in advance.
    lines += [
        f"<<<body {m.id}",
        body,
        f">>>body {m.id}",
        f'reply: agentmaild reply {m.id} --body "..."',
    ]
    return "\n".join(lines)


def render_batch(
    messages: Sequence[MessageLike],
    *,
    agent: str,
    delivery_id: str | None = None,
    attempt: int = 1,
    banner: str = "",
    body_limit: int = 0,
) -> str:
    n = len(messages)
    head = f"[agentmail] {n} new message{'s' if n != 1 else ''} for {agent}"
    if delivery_id:
        head += f" (delivery {delivery_id})"
    parts = [banner] if banner else []
    parts.append(head)
    if attempt > 1:
        parts.append(
            f"[agentmail] REDELIVERY (attempt {attempt}) of delivery {delivery_id}: you may have "
            "seen these messages already; do not act on them twice."
        )
    parts += [render_message(m, i, n, body_limit=body_limit) for i, m in enumerate(messages, 1)]
    parts.append(f"[agentmail] end of {n} message{'s' if n != 1 else ''}.")
    return "\n".join(parts) + "\n"


def render_banner(nudges: Sequence[dict[str, Any]]) -> str:
    if not nudges:
        return ""
    items = "; ".join(
        f"{n['priority']} {n['type']} from {n['from_agent']}: {_q(n['subject'])}"
        for n in nudges[:5]
    )
    more = f" (+{len(nudges) - 5} more)" if len(nudges) > 5 else ""
    return f"PRIORITY: {len(nudges)} message(s) need attention first: {items}{more}"
