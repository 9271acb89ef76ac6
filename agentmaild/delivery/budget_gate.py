"""Between one delivery loop and the store: what each turn cost goes into the history, and an agent
over its daily budget (``rules.budget``) gets no more mail until a raise, a reset or the next day.

Cheap on the hot path: the store is asked once when the loop starts, once after each turn that
cost something, and every ``RECHECK_S`` while the agent is over budget (so a raise or a reset
from the CLI takes effect within that), never per claim otherwise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from agentmaild.delivery.types import Clock
from agentmaild.errors import AgentmaildError
from agentmaild.models import Batch
from agentmaild.rules.budget import BudgetState, budget_status
from agentmaild.store.hops import quick_read
from agentmaild.store.usage import UsageRecord

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from agentmaild.store.aio import AsyncMailStore

RECHECK_S = 2.0


@quick_read  # a few rows by key: with the store's thread idle, no thread hop (``store.hops``)
def _status(store: Any, agent: str, now: float) -> BudgetState | None:
    return budget_status(store, agent, now)


def record_usage(store: Any, record: UsageRecord) -> None:
    store.record_usage(record)  # every store has it (``store.usage``), not the ABC


def thread_of(batch: Batch) -> str | None:
    """The batch's thread for the cost figures: its newest message's (a message without a
    thread id starts its own thread, named by its id)."""
    if not batch.messages:
        return None
    newest = batch.messages[-1]
    return newest.thread_id or newest.id


class BudgetGate:
    """One agent's usage records and budget hold, on the loop's clocks and logger."""

    def __init__(
        self, agent: str, store: AsyncMailStore, *, wall: Clock, clock: Clock,
        log: FilteringBoundLogger,
    ) -> None:  # fmt: skip
        self._agent = agent
        self._store = store
        self._wall = wall
        self._clock = clock
        self._log = log
        self._due = 0.0  # on ``clock``: when to ask the store again (inf: after the next cost)
        self.reason: str | None = None  # why the agent gets no mail now (over budget)

    async def holds(self) -> str | None:
        """The reason the agent is held (over budget), or None when mail may go in."""
        if self._clock() < self._due:
            return self.reason
        try:
            state = await self._store.run_sync(_status, self._store.sync, self._agent, self._wall())
        except AgentmaildError as exc:  # keep the last answer; look again soon
            self._log.warning("delivery.budget_unknown", error=exc.message)
            self._due = self._clock() + RECHECK_S
            return self.reason
        held = state.reason() if state is not None and state.over else None
        if held and not self.reason:
            self._log.warning("delivery.over_budget", **(state.to_dict() if state else {}))
        elif self.reason and not held:
            self._log.info("delivery.budget_cleared", agent=self._agent)
        self.reason = held
        self._due = self._clock() + RECHECK_S if held else math.inf
        return held

    async def charge(self, batch: Batch, channel: Any) -> None:
        """Record what the turn just ended cost (if its channel read any usage) and look at
        the budget again before the next claim. Never fails the settle it runs before."""
        usage = getattr(channel, "last_usage", None)
        if usage is None:
            return
        channel.last_usage = None
        record = UsageRecord(
            delivery_id=batch.delivery_id, attempt=batch.attempt, agent=self._agent,
            thread_id=thread_of(batch), tokens_in=usage.tokens_in, tokens_out=usage.tokens_out,
            cost_usd=usage.cost_usd, at=self._wall(),
        )  # fmt: skip
        try:
            await self._store.run_sync(record_usage, self._store.sync, record)
        except AgentmaildError as exc:
            self._log.warning(
                "delivery.usage_unrecorded", delivery_id=batch.delivery_id, error=exc.message
            )
        if usage.cost_usd:
            self._due = 0.0
