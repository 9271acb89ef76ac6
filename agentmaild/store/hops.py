"""Thread hops shared by concurrent callers: the store calls queued meanwhile run in one hop.

``AsyncMailStore`` runs every call of its synchronous store in a worker thread, one at a time. With
many delivery loops busy (a burst of mail to many agents), a hop per call means a thread wake-up
per call on each side; on a loaded machine each wake-up can wait for a core. Here the calls that
queue while a hop is running are all run, in order, by the next hop: one wake-up for the lot.

Calls made with ``grouped=True`` (the delivery loops' claims, acks, releases, lease extensions and
looks) may also share one *transaction*: when a hop holds two or more of them in a row, they run
through the store's ``run_grouped`` (SQLite: one ``BEGIN IMMEDIATE … COMMIT`` for all of them, see
``store.sqlite_group``). Their results are handed back only once that commit is done, so a caller
never acts on a write that a crash could still undo.

Calls made with ``quick=True`` (reads of a few rows by key: the loop's look for mail read
elsewhere) run at once in the caller's thread when no hop is running or queued: the connection is
then nobody else's, and a WAL reader waits for no lock, so this saves a hop there and back (two
thread wake-ups) on the path of a single woken delivery.

With an ``inline`` runner (SQLite's ``run_inline``, turned on by the daemon), a grouped call
(a claim, an ack: one short write) made while no hop runs or waits is tried the same way: at once
in the caller's thread, if it can take the write lock without waiting. When it cannot, the runner
says ``NOT_NOW`` having written nothing, and the call takes its hop as ever. Only while the store
is little used, though (at most ``_INLINE_MAX_CALLS`` calls in a ``_INLINE_WINDOW_S`` window: one
or two woken deliveries): under load, calls that wait for a hop share its transaction and its
WAL pages, and the event loop's thread is left to the loops. (Measured under bench_daemon's
sustained load: with or without this rule the throughput is the same within noise, 1,004-1,036
against 1,049-1,088 msg/s in two runs each; what cut the batches there to 1.2 messages from 2.7,
and the rate by a quarter, was a faster thread hop, tried and dropped.)

Same guarantees as one ``anyio.to_thread.run_sync`` per call behind a ``CapacityLimiter(1)``: the
calls never overlap, each runs once (or, when its group fails as a whole, once more on its own),
and a caller cancelled while its call is queued or running still waits for it to finish (its
result returns; the cancellation is delivered at the caller's next checkpoint), so a claim that
committed always reaches its caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import anyio
import anyio.to_thread

from agentmaild.store.notnow import NOT_NOW

T = TypeVar("T")


class Runnable(Protocol):
    """What a group runner is handed: ``run()`` (never raises) and ``reset()`` (run it again)."""

    def run(self) -> None: ...

    def reset(self) -> None: ...


GroupRunner = Callable[[Sequence[Runnable]], None]
InlineRunner = Callable[[Callable[[], Any]], Any]
_INLINE_WINDOW_S = 0.01
_INLINE_MAX_CALLS = 6  # a woken delivery makes three: its claim, its look, its ack
F = TypeVar("F", bound=Callable[..., Any])
_GROUPABLE = "_agentmail_groupable"


def groupable(fn: F) -> F:
    """Mark a store call that may share its transaction with others queued beside it."""
    setattr(fn, _GROUPABLE, True)
    return fn


def is_groupable(fn: Callable[..., Any]) -> bool:
    return bool(getattr(fn, _GROUPABLE, False))


_QUICK = "_agentmail_quick"


def quick_read(fn: F) -> F:
    """Mark a read of a few rows by key: with the store's thread idle it runs at once in the
    caller's thread, without a hop there and back (two thread wake-ups)."""
    setattr(fn, _QUICK, True)
    return fn


def is_quick_read(fn: Callable[..., Any]) -> bool:
    return bool(getattr(fn, _QUICK, False))


class _Call(Generic[T]):
    """One queued call. ``finished`` is set in the worker thread once it ran; ``settled`` in the
    event loop's thread once its whole hop is over: only then is the result the caller's (a group
    commits after its last call ran, and may still fail and run every call again on its own)."""

    __slots__ = ("error", "finished", "fn", "grouped", "settled", "value")

    def __init__(self, fn: Callable[[], T], grouped: bool) -> None:
        self.fn = fn
        self.grouped = grouped
        self.value: T | None = None
        self.error: BaseException | None = None
        self.finished = False
        self.settled = False

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as exc:  # handed to the caller, whatever it is
            self.error = exc
        finally:
            self.finished = True

    def reset(self) -> None:
        self.value, self.error, self.finished = None, None, False

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def _run_all(calls: list[_Call[Any]], group: GroupRunner | None) -> None:
    """Each call in order; runs of two or more grouped calls through ``group``."""
    i = 0
    while i < len(calls):
        j = i
        while group is not None and j < len(calls) and calls[j].grouped:
            j += 1
        if j - i >= 2 and group is not None:
            try:
                group(calls[i:j])
            except BaseException as exc:  # the runner broke: no result of it may stand
                for call in calls[i:j]:
                    call.value, call.error, call.finished = None, exc, True
                raise
            i = j
        else:
            calls[i].run()
            i += 1


class Hops:
    """Runs sync callables in a worker thread, one at a time, batching those queued meanwhile.

    ``group``: the store's ``run_grouped``, or None (every call stands alone).
    """

    def __init__(
        self, group: GroupRunner | None = None, *, inline: InlineRunner | None = None
    ) -> None:
        self._group = group
        self._inline = inline
        self._queue: list[_Call[Any]] = []
        self._running = False
        self._idle: anyio.Event | None = None  # set when a hop ends; made inside the event loop
        self._hop = anyio.to_thread.run_sync  # the thread hop itself (a test may slow it)
        self.hops = 0  # worker-thread hops taken
        self.calls = 0  # calls run
        self.inline = 0  # quick reads run in the caller's thread
        self.inline_writes = 0  # grouped calls run in the caller's thread (``inline``)
        self._window_start = 0.0  # the store's recent use, for ``inline`` (see the module doc)
        self._window_calls = 0

    async def run(self, fn: Callable[[], T], *, grouped: bool = False, quick: bool = False) -> T:
        """``quick``: a read that runs in the caller's thread when no hop runs or waits: nothing
        else uses the connection then, and a WAL reader takes no lock another holds."""
        if self._inline is not None:
            now = time.monotonic()
            if now - self._window_start > _INLINE_WINDOW_S:
                self._window_start, self._window_calls = now, 0
            self._window_calls += 1
        if not self._running and not self._queue:
            if quick:
                self.inline += 1
                return fn()
            if grouped and self._inline is not None and self._window_calls <= _INLINE_MAX_CALLS:
                value = self._inline(fn)
                if value is not NOT_NOW:
                    self.inline_writes += 1
                    return value  # type: ignore[no-any-return]
        call: _Call[T] = _Call(fn, grouped)
        self._queue.append(call)
        with anyio.CancelScope(shield=True):
            while not call.settled:
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
            await self._hop(_run_all, batch, self._group)
        except BaseException as exc:  # the hop itself failed: every call left gets the error
            for call in batch:
                if not call.finished:
                    call.error, call.finished = exc, True
        finally:
            for call in batch:
                call.settled = True
            self.hops += 1
            self.calls += len(batch)
            self._running = False
            idle, self._idle = self._idle, None
            if idle is not None:
                idle.set()
