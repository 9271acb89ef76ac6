"""One worker thread for one store's hops: a queue in, the event loop's own callback out.

``anyio.to_thread.run_sync`` is built for many callers at once: a capacity limiter, a cancel
scope, a pool of threads that it sizes and prunes. ``hops.Hops`` needs none of that: it has one
call in flight at a time, already shielded from cancellation. This thread takes the call from a
queue and hands the outcome back with ``call_soon_threadsafe``, which costs a third of the CPU of
the general path (measured: about 30 against 90 µs a round trip under uvloop) on every claim and
ack the daemon makes.

The thread starts on the first call and ends after ``idle_s`` without one, so a store that is
not used holds no thread, and a process that made many (the tests) does not keep them all. As in
anyio's own worker threads, a call runs in a copy of the caller's context (contextvars) and may
use ``anyio.from_thread`` (the thread carries the event loop's token, where anyio keeps it).
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.lowlevel
from anyio._core._eventloop import threadlocals as _anyio_thread

T = TypeVar("T")

_IDLE_S = 10.0
_Job = tuple[
    Callable[[], Any], contextvars.Context, asyncio.AbstractEventLoop, "asyncio.Future[Any]", Any
]


def _settle(fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if fut.done():  # the waiter was cancelled natively (the loop shutting down)
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


class Worker:
    """Runs callables in its own thread, one at a time, in the order they were submitted."""

    def __init__(self, name: str = "agentmaild-store", *, idle_s: float = _IDLE_S) -> None:
        self._name = name
        self._idle_s = idle_s
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._alive = False
        self._token: Any = None  # anyio's token of the loop that calls (for anyio.from_thread)
        self._token_loop: asyncio.AbstractEventLoop | None = None

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` in the worker thread. A caller cancelled meanwhile (natively: anyio callers
        shield) still waits for ``fn`` to finish before the cancellation goes on, so whoever
        runs the next call never overlaps this one."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        if self._token is None or self._token_loop is not loop:
            self._token, self._token_loop = anyio.lowlevel.current_token(), loop
        with self._lock:
            self._jobs.put((fn, contextvars.copy_context(), loop, fut, self._token))
            if not self._alive:
                self._alive = True
                threading.Thread(target=self._serve, name=self._name, daemon=True).start()
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            if not fut.done():
                await asyncio.wait([fut])
            raise

    def _serve(self) -> None:
        while True:
            try:
                fn, context, loop, fut, token = self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():
                        self._alive = False
                        return
                continue
            value: Any = None
            error: BaseException | None = None
            _anyio_thread.current_token = token
            try:
                value = context.run(fn)
            except BaseException as exc:  # handed to the caller, whatever it is
                error = exc
            finally:
                del _anyio_thread.current_token
            try:
                loop.call_soon_threadsafe(_settle, fut, value, error)
            except RuntimeError:  # the loop closed meanwhile: nobody is waiting any more
                pass
            del fn, context, loop, fut, token, value, error
