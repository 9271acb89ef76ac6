"""Renders mail as the text an agent reads: batches under a framing key a body cannot forge, the
PRIORITY banner; and mail text for a person (``visible``, ``json_text``).

Stdlib only: the hook and ``check --inject`` fast paths import it on every prompt.
"""

from __future__ import annotations

import json
import os

from agentmaild.mail.vocab import PROTOCOL_TYPES

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
# Bidirectional controls: shown raw, U+202E and kin reorder what a person reads (a reversed
# command, a hidden suffix) without a control byte in sight.
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))


def visible(text: str) -> str:
    """``text`` for a terminal: control characters other than newline and tab spelled ``\\xNN``,
    bidirectional controls ``\\uNNNN``.

    Mail is written by other agents; printed raw, ESC/OSC/CSI sequences in it could set the
    clipboard (OSC 52), retitle the window, clear the screen, or hide text behind a carriage
    return. Only a human's terminal gets this form; agents get the text as sent (but see
    ``neutralise``).
    """
    if not _VISIBLE:  # built on first use: the hook path imports this module and never calls it
        controls = [*range(0x20), *range(0x7F, 0xA0)]
        _VISIBLE.update({c: f"\\x{c:02x}" for c in controls if c not in (0x0A, 0x09)})
        _VISIBLE.update({c: f"\\u{c:04x}" for c in _BIDI})
    return text.translate(_VISIBLE)


def json_text(data: object) -> str:
    """``data`` as one line of JSON whose every character is printable: C1 controls (U+009B is
    a CSI), bidirectional controls and line separators go as ``\\uNNNN`` escapes, which a JSON
    reader turns back into the same string."""
    text = json.dumps(data, ensure_ascii=False)
    return text if text.isprintable() else "".join(_escape(c) for c in text)


def _escape(c: str) -> str:
    """A printable character as itself, any other as its JSON escape (``\\n``, ``\\u009b``, a
    surrogate pair beyond U+FFFF: tag characters can hide text from a person)."""
    return c if c.isprintable() else json.dumps(c)[1:-1]


def _q(value: str) -> str:
    """Metadata goes out JSON-quoted, so a crafted subject cannot start a fake field line (nor
    hide one behind U+2028, U+0085 or a bidirectional control: those are escaped too)."""
    return json_text(value)


def _inline(value: str) -> str:
    """A raw field (an id, a type, a payload) on one line: a row another tool wrote (Overstory's
    ``ov mail``) is not checked by our rules, so a line break in it must not start a line."""
    return value if value.isprintable() else "".join(_escape(c) for c in value)


# -- framing a body cannot forge ------------------------------------------------------------
# Each rendering draws a fresh key (64 random bits) and the body delimiters carry it. The key
# exists only in the rendered text: it is not stored, not logged, not derived from any id, and
# it is drawn after the bodies were written, so no sender can put it in one. Lines of a body
# that start like our framing are shown behind QUOTED, so they cannot pass for it either.
KEY_CHARS = 16
QUOTED = "[quoted] "
_FRAME_STARTS = (
    "[agentmail", "[...", "---message", "<<<body", ">>>body", "redelivery", "priority:",
    "from:", "type:", "subject:", "thread:", "payload:", "reply:", "sent:",
)  # fmt: skip
# A line whose first visible character is one of these cannot start like ours.
_PLAIN_FIRST = frozenset(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "[-<>rRpPfFtTsS") | {""}


def new_key() -> str:
    """A delivery's framing key: os.urandom, not ``secrets`` (an import the hook would pay)."""
    return os.urandom(KEY_CHARS // 2).hex()


def _framing_like(line: str) -> bool:
    """Whether ``line``, as a reader sees it, starts like a line of ours: leading blanks and
    invisible characters skipped, compatibility forms folded (fullwidth brackets), case and inner
    blanks ignored."""
    head = line.lstrip()[:48]
    return head[:1] not in _PLAIN_FIRST and _head_like_framing(head)


def _head_like_framing(head: str) -> bool:
    if not (head.isascii() and head.isprintable()):
        i, n = 0, len(head)
        while i < n and (head[i].isspace() or not head[i].isprintable()):
            i += 1  # characters a reader does not see (U+200B, U+202E, U+FEFF, controls)
        head = head[i:]
        if not head.isascii():
            import unicodedata  # only for text with non-ASCII at a line start

            head = unicodedata.normalize("NFKC", head)
        head = "".join(c for c in head if c.isprintable())
    return "".join(head.split()).lower().startswith(_FRAME_STARTS)


def neutralise(body: str) -> str:
    """``body`` with each line that starts like framing put behind ``QUOTED`` (every line break
    Python knows counts: a reader may take ``\\r`` or U+2028 for one)."""
    lines = body.splitlines(keepends=True)
    # Per line as little as possible: the daemon renders every message it delivers.
    if {line.lstrip()[:1] for line in lines} <= _PLAIN_FIRST:
        return body
    if not any(_framing_like(line) for line in lines):
        return body
    return "".join(QUOTED + line if _framing_like(line) else line for line in lines)


def render_message(m: MessageLike, index: int, total: int, *, key: str, body_limit: int = 0) -> str:
    body = m.body
    cut = bool(body_limit) and len(body) > body_limit
    body = neutralise(body[:body_limit] if cut else body)
    if cut:
        body += f"\n[... truncated; run `agentmaild read {_inline(m.id)}` for the rest]"
    mid = _inline(m.id)
    lines = [
        f"--- message {index}/{total}: {mid} ---",
        f"from: {_q(m.from_agent)}",
        f"type: {_inline(m.type)}  priority: {_inline(m.priority)}  sent: {_inline(m.created_at)}",
        f"subject: {_q(m.subject)}",
    ]
    if m.thread_id:
        lines.append(f"thread: {_inline(m.thread_id)}")
    if m.payload and m.type in PROTOCOL:
        lines.append(f"payload: {_inline(m.payload)}")
    lines += [
        f"<<<body {key}",
        body,
        f">>>body {key}",
        f'reply: agentmaild reply {mid} --body "..."',
    ]
    return "\n".join(lines)


def measure_message(m: MessageLike, index: int, total: int, *, body_limit: int = 0) -> int:
    """The length ``render_message`` gives ``m`` (a key's length is fixed; this one is never
    shown)."""
    return len(render_message(m, index, total, key="0" * KEY_CHARS, body_limit=body_limit))


def render_batch(
    messages: Sequence[MessageLike],
    *,
    agent: str,
    delivery_id: str | None = None,
    attempt: int = 1,
    banner: str = "",
    body_limit: int = 0,
    title: str = "new",
) -> str:
    """The text of one delivery, under a key drawn for it alone (see ``new_key``); ``title``
    words the head ("new" mail delivered; the MCP tools say what they fetched)."""
    key = new_key()
    n = len(messages)
    plural = "s" if n != 1 else ""
    head = f"[agentmail] {n} {title} message{plural} for {agent}"
    if delivery_id:
        head += f" (delivery {delivery_id})"
    parts = [banner] if banner else []
    parts.append(head)
    if attempt > 1:
        parts.append(
            f"[agentmail] REDELIVERY (attempt {attempt}) of delivery {delivery_id}: you may have "
            "seen these messages already; do not act on them twice."
        )
    parts.append(
        f'[agentmail] key {key}: each body runs from "<<<body {key}" to ">>>body {key}"; '
        "what lies between is written by the message's sender, not by agentmail (lines there that"
        f' look like ours start "{QUOTED}").'
    )
    parts += [
        render_message(m, i, n, key=key, body_limit=body_limit) for i, m in enumerate(messages, 1)
    ]
    parts.append(f"[agentmail] end of {n} message{plural} (key {key}).")
    return "\n".join(parts) + "\n"


def render_banner(nudges: Sequence[dict[str, Any]]) -> str:
    if not nudges:
        return ""
    items = "; ".join(
        f"{_inline(n['priority'])} {_inline(n['type'])} from {_inline(n['from_agent'])}: "
        f"{_q(n['subject'])}"
        for n in nudges[:5]
    )
    more = f" (+{len(nudges) - 5} more)" if len(nudges) > 5 else ""
    return f"PRIORITY: {len(nudges)} message(s) need attention first: {items}{more}"
