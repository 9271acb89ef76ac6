"""Ask and wait: a ``question`` is sent, and its asker waits for the first reply in its thread.

Two waits, one contract (``find_reply``): under a daemon the asker holds an ``await_reply``
request on the control socket, and the daemon wakes it when a ``wake`` names the asker (every
``send``/``reply`` pokes its recipients), re-checking at its poll interval in case a poke was
lost. With no daemon the asker watches the store itself: its change mark (``store.marks``, which
moves only when another connection commits) is read with a backoff from 2 ms to 100 ms, and the
thread is queried only when it moved. Either way the question stays answerable after a timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from agentmaild.errors import ControlError
from agentmaild.models import Message
from agentmaild.store.base import MailStore

if TYPE_CHECKING:
    import anyio

    from agentmaild.store.aio import AsyncMailStore

# One await_reply request waits at most this long; the asker then asks again (a daemon restart or
# a client that went away costs at most this much).
DAEMON_WAIT_MAX_S = 30.0
_STORE_BACKOFF_MIN_S = 0.002
_STORE_BACKOFF_MAX_S = 0.1
_UNSEEN = object()  # a mark no store has: the first look always reads the thread


def find_reply(store: MailStore, question_id: str, asker: str) -> Message | None:
    """The first message in the question's thread addressed to the asker by someone else."""
    for m in store.thread(question_id):
        if m.id != question_id and m.to_agent == asker and m.from_agent != asker:
            return m
    return None


class ReplyWaiters:
    """The daemon's waiting askers, by name; ``notify`` is sync and never blocks."""

    def __init__(self) -> None:
        self._events: dict[str, set[anyio.Event]] = {}

    def notify(self, agents: Iterable[str] | None) -> None:
        names = list(self._events) if agents is None else agents
        for name in names:
            for event in self._events.get(name, ()):
                event.set()

    async def wait(
        self,
        store: AsyncMailStore,
        question_id: str,
        asker: str,
        timeout_s: float,
        recheck_s: float,
    ) -> Message | None:
        """The reply once it is in the store, or None after ``timeout_s``."""
        import anyio
        import structlog

        log = structlog.get_logger(__name__)
        deadline = anyio.current_time() + timeout_s
        log.debug("ask.waiting", thread=question_id, agent=asker, timeout_s=timeout_s)
        while True:
            event = anyio.Event()
            # Registered before the look, so a wake-up between the look and the wait is kept.
            self._events.setdefault(asker, set()).add(event)
            try:
                found = await store.run_sync(find_reply, store.sync, question_id, asker)
                left = deadline - anyio.current_time()
                if found is not None or left <= 0:
                    return found
                with anyio.move_on_after(min(left, recheck_s)):
                    await event.wait()
            finally:
                self._forget(asker, event)

    def _forget(self, asker: str, event: anyio.Event) -> None:
        waiting = self._events.get(asker)
        if waiting is not None:
            waiting.discard(event)
            if not waiting:
                del self._events[asker]


def wait_for_reply(
    store: MailStore, socket: Path | None, question_id: str, asker: str, timeout_s: float
) -> Message | None:
    """Block until the reply arrives (None after ``timeout_s``): the daemon's wait, else the store.

    ``store`` is the asker's store: with no daemon, its change mark is watched.
    """
    deadline = time.monotonic() + timeout_s
    if socket is not None:
        found, answered = _wait_on_daemon(store, socket, question_id, asker, deadline)
        if answered:
            return found
    return _wait_on_store(store, question_id, asker, deadline)


def _wait_on_daemon(
    store: MailStore, socket: Path, question_id: str, asker: str, deadline: float
) -> tuple[Message | None, bool]:
    """(reply, True) when the daemon saw the wait through; (None, False) when it cannot help."""
    from agentmaild.control.client import request

    while (left := deadline - time.monotonic()) > 0:
        wait_s = min(left, DAEMON_WAIT_MAX_S)
        args = {"thread": question_id, "agent": asker, "timeout_s": wait_s}
        try:
            result = request(socket, "await_reply", args, timeout=wait_s + 10.0)
        except ControlError:
            return None, False  # no daemon (or it went away): watch the store instead
        if result.get("message_id"):
            return store.get_message(str(result["message_id"])), True
    return None, True


def _wait_on_store(
    store: MailStore, question_id: str, asker: str, deadline: float
) -> Message | None:
    """Look for the reply each time the store's change mark moved (``MailStore.change_mark``),
    reading the mark with a backoff from 2 ms to 100 ms; a store with no mark is looked at every
    time."""
    seen: object = _UNSEEN
    delay = _STORE_BACKOFF_MIN_S
    while True:
        mark = store.change_mark()
        if mark is None or mark != seen:
            if mark is not None:
                seen, delay = mark, _STORE_BACKOFF_MIN_S
            found = find_reply(store, question_id, asker)
            if found is not None:
                return found
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(delay, left))  # a sleeping reader: a store file has no cross-process notify
        delay = min(delay * 2, _STORE_BACKOFF_MAX_S)

def ask(
    store: MailStore, asker: str, to: str, subject: str, body: str, priority: str, wait_s: float
) -> tuple[Message, Message | None]:
    """``agentmaild ask``: send ``asker``'s question under the config's limits, poke its
    recipient, wait up to ``wait_s`` for the first reply and ack it (``by="ask"``).
    Returns (question, reply or None); the question stays answerable after a timeout."""
    from agentmaild.hot.access import daemon_socket, mailer, poke

    sent = mailer(store).send(
        sender=asker, to=to, subject=subject, body=body, type="question", priority=priority
    )
    question = sent.messages[0]
    poke(store, [question.to_agent])
    reply = wait_for_reply(store, daemon_socket(store), question.id, asker, wait_s)
    if reply is not None:
        store.ack([reply.id], by="ask")
    return question, reply


def timeout_message(question_id: str, to: str, asker: str, wait_s: float) -> str:
    """What an ask that timed out says (the CLI's error line, the MCP tool's error)."""
    return (
        f"no reply to {question_id} from {to} within {wait_s:g}s; the "
        f"question stays open: its answer will be in {asker}'s mail "
        f"(`agentmaild thread {question_id}`)"
    )


_UNITS_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_timeout(text: str) -> float:
    """Seconds from ``90``, ``30s``, ``10m`` or ``1h``; ``ValidationError`` says what is."""
    from agentmaild.errors import ValidationError

    word = text.strip().lower()
    unit = word[-1:] if word[-1:] in ("s", "m", "h") else ""
    try:
        value = float(word[: len(word) - len(unit)]) * _UNITS_S[unit]
    except ValueError:
        value = -1.0
    if not (0 < value <= 7 * 86400):
        raise ValidationError(
            f"--timeout: {text!r} is not a duration (90, 30s, 10m, 1h; at most a week)"
        )
    return value
