"""The loop guard: what a send asks of the store so repeats collapse and ping-pong is held.

A repeat of the same mail (sender, ``--to``, subject and body; also type, priority, thread and
payload) inside ``duplicate_window_s`` is not written: the send returns the first one's ids with
``duplicate`` set, and the store counts it as ``collapsed``. Mail between two agents on one
thread is counted per ``pingpong_window_s``; one past ``pingpong_max`` holds the thread for that
pair (the send is refused with ``LoopHeld``) and writes exactly one ``escalation`` to whoever
should look: the pair's common parent, else the sender's parent, else the recipient's, else
``operator``. A held thread refuses every later send between the pair on it (``Mailer`` asks
``checks.held_pair`` for a send whose request carries no guard of its own: a group send, an
idempotent one). The windows and caps are the store's team rules (``Mailer.rules``), never the
sender's own config.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from agentmaild.config import LimitsConfig
from agentmaild.ids import iso_now, new_id
from agentmaild.mail.vocab import DAEMON_SENDER, IMPLICIT_RECIPIENTS, OPERATOR
from agentmaild.models import Message
from agentmaild.store import checks
from agentmaild.store.base import MailStore
from agentmaild.store.guard import ThreadGuard

# CPython's own SHA-256 (the same digest as hashlib's): hashlib loads OpenSSL first, ~2.5 ms of
# every cold send
if TYPE_CHECKING:
    from hashlib import sha256
else:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # CPython 3.12+
        except ImportError:
            from hashlib import sha256


def content_digest(*content: str | None) -> str:
    """What makes two sends the same, hashed: each part length-prefixed (None as ``-``), so no
    two different lists of parts give one text. (A third of the cost of hashing their JSON, on
    every send; a digest stored by an older version only fails to collapse one repeat.)"""
    text = "\x1f".join("-" if c is None else f"{len(c)}:{c}" for c in content)
    return sha256(("dup2\x1f" + text).encode("utf-8", "surrogatepass")).hexdigest()


def guard_fields(
    store: MailStore,
    limits: LimitsConfig,
    *,
    sender: str,
    to: str,
    subject: str,
    body: str,
    thread_id: str | None,
    direct: bool,
    extra: tuple[str | None, ...] = (),
) -> dict[str, Any]:
    """The ``InsertRequest`` fields of the loop guard for one send (empty when both rules are off)
    under ``limits``, the store's team rules (``Mailer.rules``).

    ``direct``: one named recipient (the ping-pong cap is about two agents, not a group). A send
    with no thread starts one, so only replies and ``--thread`` sends are counted. ``extra``:
    the rest of what makes two messages the same (type, priority, thread, payload).
    """
    fields: dict[str, Any] = {}
    if limits.duplicate_window_s > 0:
        digest = content_digest(sender, to, subject, body, thread_id, *extra)
        fields["collapse"] = (digest, limits.duplicate_window_s)
    if limits.pingpong_max > 0 and direct and thread_id is not None and sender != to:
        fields["thread_guard"] = ThreadGuard(
            thread_id=thread_id,
            pair=checks.thread_pair(sender, to),
            max_messages=limits.pingpong_max,
            window_s=limits.pingpong_window_s,
            escalation=_escalation(store, limits, sender, to, thread_id),
        )
    return fields


def escalation_target(store: MailStore, sender: str, to: str) -> str:
    """The pair's common parent, else the sender's parent, else the recipient's, else operator."""
    parents = []
    for name in (sender, to):
        agent = None if name in IMPLICIT_RECIPIENTS else store.get_agent(name)
        parents.append(agent.parent if agent is not None else None)
    if parents[0] is not None and parents[0] == parents[1]:
        return parents[0]
    return next((p for p in parents if p is not None and p not in (sender, to)), OPERATOR)


def _escalation(
    store: MailStore, limits: LimitsConfig, sender: str, to: str, thread_id: str
) -> Message:
    target = escalation_target(store, sender, to)
    context = (
        f"{sender} and {to} exchanged more than {limits.pingpong_max} messages on thread "
        f"{thread_id} within {limits.pingpong_window_s:g}s; the thread is held for them "
        f"(limits.pingpong_max). Look at it with `agentmaild thread {thread_id}` and release it "
        f"with `agentmaild limits reset --thread {thread_id}`."
    )
    payload = {"severity": "warning", "taskId": None, "context": context}
    return Message(
        id=new_id("msg"),
        from_agent=DAEMON_SENDER,
        to_agent=target,
        subject=f"Loop guard: held thread {thread_id} ({sender} and {to})",
        body=context,
        type="escalation",
        priority="high",
        thread_id=thread_id,
        payload=json.dumps(payload, separators=(",", ":")),
        created_at=iso_now(time.time()),
    )
