"""The SSE fan-out: one producer publishes, each browser has a small bounded queue.

A subscriber asks for topics (``team``, ``dead``, ``timeline:<agent>``). ``publish`` never waits:
a subscriber whose queue is full (a browser that stopped reading, or reads slower than we
publish) is dropped — its stream ends, so the response finishes and the browser's EventSource
reconnects and gets the latest state. Nothing is buffered without bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

log = structlog.get_logger(__name__)

Event = tuple[str, str]  # (topic, HTML)
QUEUE_EVENTS = 8  # events a browser may fall behind by before it is dropped
MAX_SUBSCRIBERS = 64


class HubFull(Exception):
    """Too many browsers are subscribed already."""


@dataclass(eq=False)
class Subscriber:
    topics: frozenset[str]
    send: MemoryObjectSendStream[Event]
    receive: MemoryObjectReceiveStream[Event]
    dropped: bool = False


@dataclass
class Hub:
    """Subscribers by identity; the producer's ``latest`` fragment per topic."""

    queue_events: int = QUEUE_EVENTS
    max_subscribers: int = MAX_SUBSCRIBERS
    latest: dict[str, str] = field(default_factory=dict)
    dropped_total: int = 0
    _subs: set[Subscriber] = field(default_factory=set)
    _wanted: anyio.Event = field(default_factory=anyio.Event)

    def subscribe(self, topics: frozenset[str]) -> Subscriber:
        if len(self._subs) >= self.max_subscribers:
            raise HubFull(f"{self.max_subscribers} live views are open already")
        send, receive = anyio.create_memory_object_stream[Event](self.queue_events)
        sub = Subscriber(topics=topics, send=send, receive=receive)
        self._subs.add(sub)
        self._wanted.set()
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self._subs.discard(sub)
        sub.send.close()
        sub.receive.close()
        if not self._subs:
            self._wanted = anyio.Event()

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    def topics(self) -> set[str]:
        """Every topic some subscriber wants now."""
        return {t for s in self._subs for t in s.topics}

    async def wait_wanted(self) -> None:
        """Return once at least one browser is subscribed."""
        await self._wanted.wait()

    def publish(self, topic: str, html: str) -> int:
        """Queue ``html`` for every subscriber of ``topic``; returns how many were dropped."""
        self.latest[topic] = html
        dropped = 0
        for sub in list(self._subs):
            if topic not in sub.topics or sub.dropped:
                continue
            try:
                sub.send.send_nowait((topic, html))
            except anyio.WouldBlock:
                dropped += 1
                self._drop(sub)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._drop(sub)
        return dropped

    def close_all(self) -> None:
        """End every stream (the daemon is stopping: no browser should hold the server open)."""
        for sub in list(self._subs):
            sub.send.close()
        self._subs.clear()

    def _drop(self, sub: Subscriber) -> None:
        sub.dropped = True
        sub.send.close()  # the reader sees the end of its stream once it drained what it has
        self._subs.discard(sub)
        self.dropped_total += 1
        log.info("dashboard.viewer_dropped", queued=self.queue_events)
        if not self._subs:
            self._wanted = anyio.Event()
