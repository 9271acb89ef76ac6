"""Thread hops shared by concurrent callers: the store calls queued meanwhile run in one hop.

``AsyncMailStore`` runs every call of its synchronous store in a worker thread, one at a time. With
many delivery loops busy (a burst of mail to many agents), a hop per call means a thread wake-up
per call on each side; on a loaded machine each wake-up can wait for a core. Here the calls that
queue while a hop is running are all run, in order, by the next hop: one wake-up for the lot.

Same guarantees as one ``anyio.to_thread.run_sync`` per call behind a ``CapacityLimiter(1)``: the
calls never overlap, each runs once, and a caller cancelled while its call is queued or running
still waits for it to finish (its result returns; the cancellation is delivered at the caller's
next checkpoint), so a claim that committed always reaches its caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


class _Call(Generic[T]):
    __slots__ = ("error", "finished", "fn", "value")

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.value: T | None = None
        self.error: BaseException | None = None
        self.finished = False

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as exc:  # handed to the caller, whatever it is
            self.error = exc
        finally:
            self.finished = True

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def _run_all(calls: list[_Call[Any]]) -> None:
    for call in calls:
        call.run()


class Hops:
    """Runs sync callables in a worker thread, one at a time, batching those queued meanwhile."""

    def __init__(self) -> None:
        self._queue: list[_Call[Any]] = []
        self._running = False
        self._idle: anyio.Event | None = None  # set when a hop ends; made inside the event loop
        self.hops = 0  # worker-thread hops taken
        self.calls = 0  # calls run

    async def run(self, fn: Callable[[], T]) -> T:
        call: _Call[T] = _Call(fn)
        self._queue.append(call)
        with anyio.CancelScope(shield=True):
            while not call.finished:
                if self._running:
                    if self._idle is None:
                        self._idle = anyio.Event()
                    await self._idle.wait()
                else:
                    await self._drive()
        return call.outcome()

    async def _drive(self) -> None:
        self._running = True
        batch, self._queue = self._queue, []
        try:
            await anyio.to_thread.run_sync(_run_all, batch)
        except BaseException as exc:  # the hop itself failed: every call left gets the error
            for call in batch:
                if not call.finished:
                    call.error, call.finished = exc, True
        finally:
            self.hops += 1
            self.calls += len(batch)
            self._running = False
            idle, self._idle = self._idle, None
            if idle is not None:
                idle.set()
