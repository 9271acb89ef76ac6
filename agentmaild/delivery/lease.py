"""The lease of one turn: kept extended while it runs (``keep_lease``), by a timer that becomes a
task only when the turn runs long (``LeaseKeeper``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio

from agentmaild.errors import AgentmaildError

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from agentmaild.delivery.types import Clock
    from agentmaild.store.aio import AsyncMailStore


def lease_interval(lease_s: float) -> float:
    """How often a running turn's lease is extended: three times per lease."""
    return max(lease_s / 3, 0.01)


async def keep_lease(
    store: AsyncMailStore,
    delivery_id: str,
    lease_s: float,
    wall: Clock,
    extended: Callable[[float], None],
    log: FilteringBoundLogger,
) -> None:
    """Extend ``delivery_id``'s lease every interval until cancelled or the lease is lost.

    Started one interval into the turn (``LeaseKeeper``); cancelled once the turn ends. A failed
    extension is retried at the next interval (the lease still holds until it runs out)."""
    interval = lease_interval(lease_s)
    while True:
        now = wall()
        try:
            kept = await store.extend_lease(delivery_id, lease_s=lease_s, now=now)
        except AgentmaildError as exc:
            log.warning("delivery.lease_extend_failed", delivery_id=delivery_id, error=exc.message)
            await anyio.sleep(interval)
            continue
        if not kept:
            log.warning("delivery.lease_lost", delivery_id=delivery_id)
            return
        extended(now + lease_s)
        await anyio.sleep(interval)


class LeaseKeeper:
    """Runs ``keep`` (the lease extensions of one turn) from one interval into the turn on.

    Most turns end long before a third of the lease, so the task is made only when one lasts
    that long: a timer per delivery instead of a task group and a task (issue 15: they were a
    tenth of the daemon's CPU per delivery). ``stop()`` cancels the timer, or cancels the task's
    scope (an anyio cancel: it waits for a store call in flight, as a task group's did) and
    waits for the task; an unexpected error of the task is raised there, as the group raised it.
    """

    __slots__ = ("_keep", "_scope", "_stopped", "_task", "_timer")

    def __init__(self, keep: Coroutine[Any, Any, None], interval: float) -> None:
        self._keep = keep
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._stopped = False
        self._timer = asyncio.get_running_loop().call_later(interval, self._start)

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        if self._stopped:  # stopped between the timer and the task's first step
            self._keep.close()
            return
        with anyio.CancelScope() as self._scope:
            await self._keep

    async def stop(self) -> None:
        self._stopped = True
        self._timer.cancel()
        task = self._task
        if task is None:
            self._keep.close()  # never started: nothing ran
            return
        if self._scope is not None:
            self._scope.cancel()
        await asyncio.wait([task])
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error
