"""A delivery attempt's store bookkeeping: ack and release, retried while the lease holds; NDRs.

The loop runs these shielded, after the injection settled. Past the lease they stop retrying: the
supervisor's reap re-queues the batch under the same delivery id. Each ack or release writes the
attempt's row of the delivery history in its own transaction (``Attempt``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from agentmaild.delivery.types import Clock
from agentmaild.errors import AgentmaildError, NotFound, StoreError
from agentmaild.mail.mailer import DAEMON_SENDER, Mailer
from agentmaild.models import Attempt, Batch

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from agentmaild.store.aio import AsyncMailStore


class Bookkeeper:
    """Ack, release and NDRs for one agent's batches, logged on the loop's bound logger."""

    def __init__(
        self,
        agent: str,
        store: AsyncMailStore,
        mailer: Mailer,
        *,
        wall: Clock,
        log: FilteringBoundLogger,
    ) -> None:
        self._agent = agent
        self._store = store
        self._mailer = mailer
        self._wall = wall
        self._log = log

    def _record(
        self, batch: Batch, outcome: str, error: str | None, duration_s: float | None
    ) -> Attempt:
        return Attempt(
            delivery_id=batch.delivery_id,
            agent=self._agent,
            message_ids=batch.message_ids,
            attempt=batch.attempt,
            outcome=outcome,
            error=error,
            duration_s=round(duration_s, 4) if duration_s is not None else None,
            at=self._wall(),
        )

    async def ack(self, batch: Batch, *, duration_s: float | None = None) -> int:
        """Ack, retrying a failing store (a full disk) while the lease still holds the batch."""
        record = self._record(batch, "acked", None, duration_s)
        delay = 0.05
        while True:
            try:
                return await self._store.ack_delivery(
                    batch.delivery_id, now=self._wall(), record=record
                )
            except NotFound:
                raise
            except StoreError as exc:
                if self._wall() + delay >= batch.lease_until:
                    raise  # the lease ends: the supervisor's reap redelivers under the same id
                self._log.warning(
                    "delivery.ack_retrying",
                    delivery_id=batch.delivery_id,
                    error=exc.message,
                    retry_in_s=delay,
                )
                await anyio.sleep(delay)  # bounded by the lease; this runs shielded
                delay = min(delay * 2, 5.0)

    async def release(
        self,
        batch: Batch,
        error: str,
        *,
        count: int,
        max_attempts: int,
        outcome: str = "failed",
        duration_s: float | None = None,
    ) -> Any:
        record = self._record(batch, outcome, error, duration_s)
        delay = 0.05
        while True:
            try:
                return await self._store.release(
                    batch.delivery_id,
                    error=error,
                    max_attempts=max_attempts,
                    now=self._wall(),
                    count=count,
                    record=record,
                )
            except NotFound as exc:
                # The claim was reaped meanwhile: the batch is pending again already.
                self._log.warning(
                    "delivery.release_failed", delivery_id=batch.delivery_id, error=exc.message
                )
                await self._record_alone(record)
                return None
            except StoreError as exc:
                if self._wall() + delay >= batch.lease_until:
                    self._log.warning(
                        "delivery.release_failed", delivery_id=batch.delivery_id, error=exc.message
                    )
                    return None  # the lease ends and the supervisor's reap re-queues it
                await anyio.sleep(delay)  # bounded by the lease; this runs shielded
                delay = min(delay * 2, 5.0)

    async def _record_alone(self, record: Attempt) -> None:
        """The history row of an attempt whose release found nothing to release (best effort)."""
        try:
            await self._store.record_attempt(record)
        except AgentmaildError as exc:
            self._log.warning(
                "delivery.history_failed", delivery_id=record.delivery_id, error=exc.message
            )

    async def report_dead(
        self, batch: Batch, messages: Any, error: str, *, max_attempts: int
    ) -> None:
        lost = [m for m in messages if m.from_agent != DAEMON_SENDER]  # no NDR of an NDR
        if not lost:
            return
        reason = f"{len(lost)} message(s) failed {max_attempts} times: {error}"
        try:
            await self._store.run_sync(self._mailer.non_delivery_report, self._agent, lost, reason)
        except AgentmaildError as exc:
            self._log.error("delivery.ndr_failed", delivery_id=batch.delivery_id, error=exc.message)
