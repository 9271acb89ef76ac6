"""A delivery loop's figures and the settling of an attempt that moves them.

``LoopFigures`` is the base of ``DeliveryLoop``: ``_settle`` turns an attempt's outcome into an
ack or a release (through the ``Bookkeeper``; the caller shields it), a failure count, a backoff
or dead letters, and the attempt's one canonical log line. It keeps what ``status`` and
``metrics`` show (``snapshot()``) and warns once per overlong busy spell (``check_busy()``).
The loop itself steps, injects and waits.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from agentmaild.delivery.bookkeeping import Bookkeeper
from agentmaild.delivery.budget_gate import BudgetGate
from agentmaild.delivery.busy import BusySpell, why_not
from agentmaild.delivery.interrupt import Interrupting
from agentmaild.delivery.types import HISTORY_OUTCOMES, Clock, LoopSettings, Outcome, StepResult
from agentmaild.ids import iso_now
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Batch

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from agentmaild.store.aio import AsyncMailStore

_MAX_BACKOFF_EXPONENT = 32


class LoopFigures:
    """The figures of one agent's loop, on the loop's clocks and bound logger."""

    channel: Any  # the loop's channel (``DeliveryLoop``): what its last turn cost is read there

    def __init__(
        self,
        agent: str,
        store: AsyncMailStore,
        mailer: Mailer,
        settings: LoopSettings,
        *,
        clock: Clock,
        wall: Clock,
        rng: random.Random | None,
        log: FilteringBoundLogger,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._wall = wall
        self._rng = rng or random.Random()
        self._log = log
        self._books = Bookkeeper(agent, store, mailer, wall=wall, log=log)
        self._budget = BudgetGate(agent, store, wall=wall, clock=clock, log=log)
        self._abort_reason: str | None = None  # set when the agent was removed mid-delivery
        self.interrupting: Interrupting | None = None  # an interrupt is stopping the turn
        self.paused = False
        self.state = "starting"
        self.in_flight: Batch | None = None
        self.failures = 0  # failed attempts of the batch in hand (its store count)
        self.backoff_until = 0.0  # on ``clock``
        self.delivered_total = 0
        self.failed_total = 0
        self.dead_total = 0
        self.last_delivery: dict[str, Any] | None = None
        self.last_error: str | None = None
        self._spell = BusySpell()

    # -- bookkeeping (always shielded by the caller) ----------------------------------------
    async def _settle(self, batch: Batch, outcome: Outcome, started: float) -> StepResult:
        outcome = self._as_interrupted(batch, outcome)
        result = outcome.result
        spent_s = self._clock() - started
        await self._budget.charge(batch, self.channel)  # what the turn cost, into the history
        if result is StepResult.DELIVERED:
            acked = await self._books.ack(batch, duration_s=spent_s)
            self.failures, self.backoff_until = 0, 0.0
            self.delivered_total += 1
            self._remember(batch, result, None)
            self._line(batch, started, "delivery.acked", "info", acked=acked)
            return result
        error = outcome.error or result.value
        self._remember(batch, result, error)
        if result in (StepResult.CANCELLED, StepResult.INTERRUPTED):
            await self._release(batch, outcome, error, spent_s, count=0)
            if result is StepResult.INTERRUPTED:
                self._line(batch, started, "delivery.interrupted", "info", reason=error)
            elif self._abort_reason is not None:
                self._line(batch, started, "delivery.abandoned", "info", reason=error)
            else:
                self._line(batch, started, "delivery.cancelled", "info", error=error)
            return result
        if result is StepResult.BUSY:
            # It turned busy after is_busy(): nothing was typed; wait for the next wake-up.
            await self._release(batch, outcome, error, spent_s, count=0)
            self._line(batch, started, "delivery.busy", "info", error=error)
            return result
        # Unavailable (pane gone, executable missing) counts too: a recipient that never comes
        # back must end in dead letters and a non-delivery report, not in retries forever.
        released = await self._release(batch, outcome, error, spent_s, count=1)
        # The batch's own failure count (reset by ``retry``) sets the backoff, so a retried dead
        # letter, or the next batch after one, starts again from ``backoff_initial_s``.
        self.failures = released.failures if released is not None else self.failures + 1
        self.failed_total += 1
        if released is not None and released.state == "dead":
            self.dead_total += 1
            self.failures, self.backoff_until = 0, 0.0
            self._line(
                batch, started, "delivery.dead", "error", error=error, failures=released.failures
            )
            await self._books.report_dead(
                batch, released.messages, error, max_attempts=self.settings.max_attempts
            )
            return StepResult.DEAD
        delay = self._next_backoff()
        self.backoff_until = self._clock() + delay
        event = "delivery.unavailable" if result is StepResult.UNAVAILABLE else "delivery.failed"
        self._line(
            batch,
            started,
            event,
            "warning",
            error=error,
            result=result.value,
            backoff_s=round(delay, 3),
        )
        return result

    def _as_interrupted(self, batch: Batch, outcome: Outcome) -> Outcome:
        """Whatever a turn an interrupt stopped said, its batch (and the interrupt's mail in it)
        is released unread and uncounted: the next turn redelivers it under its id."""
        if self.interrupting is None or not self.interrupting.covers(batch.delivery_id):
            return outcome
        outcome, self.interrupting = Outcome(StepResult.INTERRUPTED, self.interrupting.note), None
        return outcome

    async def _release(
        self, batch: Batch, outcome: Outcome, error: str, spent_s: float, *, count: int
    ) -> Any:
        return await self._books.release(
            batch,
            error,
            count=count,
            max_attempts=self.settings.max_attempts,
            outcome=HISTORY_OUTCOMES[outcome.result],
            duration_s=spent_s,
        )

    async def _held(self) -> bool:
        """Over its daily budget (``rules.budget``): no claim; looked at again later."""
        if await self._budget.holds() is None:
            return False
        self.state = "over_budget"
        self._spell.clear()
        return True

    def _next_backoff(self) -> float:
        s = self.settings
        exponent = min(max(self.failures - 1, 0), _MAX_BACKOFF_EXPONENT)
        base = min(s.backoff_max_s, s.backoff_initial_s * float(2**exponent))
        jittered = base * (1 + s.backoff_jitter * (2 * self._rng.random() - 1))
        return max(0.0, min(s.backoff_max_s, jittered))

    def _remember(self, batch: Batch, result: StepResult, error: str | None) -> None:
        self.last_error = error if error is not None else self.last_error
        self.last_delivery = {
            "delivery_id": batch.delivery_id,
            "result": result.value,
            "at": iso_now(self._wall()),
            "attempt": batch.attempt,
            "n_messages": len(batch.messages),
        }

    def _line(self, batch: Batch, started: float, event: str, level: str, **kw: Any) -> None:
        """The one canonical log line of an attempt; bodies never appear in it."""
        duration_ms = round((self._clock() - started) * 1000, 2)
        getattr(self._log, level)(
            event,
            delivery_id=batch.delivery_id,
            attempt=batch.attempt,
            n_messages=len(batch.messages),
            duration_ms=duration_ms,
            **kw,
        )

    def check_busy(self) -> None:
        """Log ``delivery.busy_long`` once per busy spell that outlasts ``busy_warn_after_s``."""
        now, spell = self._clock(), self._spell
        if spell.overdue(now, self.settings.busy_warn_after_s):
            self._log.warning(
                "delivery.busy_long",
                reason=spell.reason,
                busy_for_s=round(spell.length(now) or 0.0, 1),
                delivery_id=self.in_flight.delivery_id if self.in_flight else None,
            )

    def snapshot(self) -> dict[str, Any]:
        backoff_s = max(0.0, self.backoff_until - self._clock())
        busy_for_s = self._spell.length(self._clock())
        return {
            "state": self.state,
            "busy": self.state in ("busy", "delivering", "interrupting"),
            "busy_reason": self._budget.reason or why_not(
                self._spell,
                paused=self.paused,
                backoff_s=backoff_s,
                last=self.last_delivery,
                last_error=self.last_error,
            ),
            "busy_for_s": round(busy_for_s, 1) if busy_for_s is not None else None,
            "stuck": busy_for_s is not None and busy_for_s >= self.settings.busy_warn_after_s,
            "paused": self.paused,
            "in_flight_delivery": self.in_flight.delivery_id if self.in_flight else None,
            "failures": self.failures,
            "backoff_s": round(backoff_s, 3),
            "backoff_until": iso_now(self._wall() + backoff_s) if backoff_s > 0 else None,
            "last_delivery": self.last_delivery,
            "last_error": self.last_error,
            "delivered_total": self.delivered_total,
            "failed_total": self.failed_total,
            "dead_total": self.dead_total,
        }
