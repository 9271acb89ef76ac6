"""FakeChannel: an in-process channel for tests, shipped with the package (cf. MockTransport)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from agentmaild.channels.base import Channel
from agentmaild.errors import DeliveryFailed
from agentmaild.models import Batch

Handler = Callable[[Batch, str], Awaitable[None]]


class FakeChannel(Channel):
    """Records every delivery; behaviour is scripted by ``busy``, ``fail_next`` or a handler.

    ``delivered`` lists the batches the channel confirmed; ``attempts`` lists every call.
    ``event`` is set after each attempt, so tests wait on it instead of sleeping.
    """

    kind = "fake"

    def __init__(self, handler: Handler | None = None, *, busy: bool = False) -> None:
        self.busy = busy
        self.fail_next = 0
        self.handler = handler
        self.delivered: list[tuple[Batch, str]] = []
        self.attempts: list[Batch] = []
        self.closed = False
        self.event = anyio.Event()

    async def is_busy(self) -> bool:
        return self.busy

    async def deliver(self, batch: Batch, text: str) -> None:
        self.attempts.append(batch)
        try:
            if self.fail_next > 0:
                self.fail_next -= 1
                raise DeliveryFailed("scripted failure")
            if self.handler is not None:
                await self.handler(batch, text)
            self.delivered.append((batch, text))
        finally:
            self.event.set()
            self.event = anyio.Event()

    async def aclose(self) -> None:
        self.closed = True
