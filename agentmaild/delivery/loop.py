"""DeliveryLoop: step() = busy? → claim → inject → ack/release; run() = step + wait(wake | poll).

The ack contract: a batch is acked only after ``channel.deliver`` returned (the agent confirmed);
on failure or cancellation it is released. Ack and release are bookkeeping and run shielded, so a
shutdown that cancels an injection still gives the batch back. A released batch keeps its
delivery id; after ``max_attempts`` failures it is a dead letter and its senders get an NDR.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import structlog

from agentmaild.delivery.bookkeeping import Bookkeeper
from agentmaild.delivery.busy import BusySpell, why_not
from agentmaild.delivery.types import HISTORY_OUTCOMES, Clock, LoopSettings, Outcome, StepResult
from agentmaild.errors import AgentBusy, AgentmaildError, AgentUnavailable, DeliveryFailed
from agentmaild.ids import iso_now
from agentmaild.jsoninput import storable
from agentmaild.mail import Mailer
from agentmaild.models import Agent, Batch
from agentmaild.render import render_batch

if TYPE_CHECKING:
    from agentmaild.channels.base import Channel
    from agentmaild.store.aio import AsyncMailStore

log = structlog.get_logger(__name__)

# Rendered text around the bodies (headers, banners, reply hints) stays under this.
_RENDER_OVERHEAD_CHARS = 1500
_MAX_BACKOFF_EXPONENT = 32

# After these results run() steps again at once: there may be more mail waiting.
_AGAIN = frozenset({StepResult.DELIVERED, StepResult.DEAD})
_BACKING_OFF = frozenset(
    {StepResult.FAILED, StepResult.TIMEOUT, StepResult.UNAVAILABLE, StepResult.BACKOFF}
)


class DeliveryLoop:
    """Delivers one agent's mail through one channel. ``stop``/``wake``/``abort`` never block.

    ``gated``: the supervisor's poll gate wakes this loop when it has mail, so an idle loop waits
    for a wake-up only (no query of its own per poll interval).
    """

    def __init__(
        self,
        agent: Agent,
        channel: Channel,
        store: AsyncMailStore,
        mailer: Mailer,
        settings: LoopSettings,
        *,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        rng: random.Random | None = None,
        gated: bool = False,
    ) -> None:
        self.agent = agent
        self.channel = channel
        self.settings = settings
        self._store = store
        self._clock = clock
        self._wall = wall
        self._rng = rng or random.Random()
        self._gated = gated
        self._log = log.bind(agent=agent.name)
        self._books = Bookkeeper(agent.name, store, mailer, wall=wall, log=self._log)
        self._wake = anyio.Event()
        self._stopping = False
        self._deliver_scope: anyio.CancelScope | None = None
        self._aborted = False
        self._abort_reason: str | None = None
        self._confirmed = False
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
        # Set whenever no delivery is in flight; drain() waits on it.
        self.quiet = anyio.Event()
        self.quiet.set()

    # -- control (sync, non-blocking) -------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Claim nothing more; ``run()`` returns once the delivery in flight (if any) settles."""
        self._stopping = True
        self._wake.set()

    def abort(self, reason: str | None = None) -> None:
        """Stop and cancel the delivery in flight; it is released (not acked, not a failure).

        With a ``reason`` (the agent was removed) the delivery is abandoned: one about to start
        is cancelled too, and the release is logged as ``delivery.abandoned``.
        """
        self._abort_reason = reason or self._abort_reason
        self.stop()
        if self._deliver_scope is not None:
            self._aborted = True
            self._deliver_scope.cancel()

    def pause(self) -> None:
        self.paused = True

    def retry_now(self) -> None:
        """Dead letters were re-queued by hand: drop the backoff and step again at once."""
        self.failures, self.backoff_until = 0, 0.0
        self._wake.set()

    def resume(self) -> None:
        self.paused = False
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping

    # -- one iteration ----------------------------------------------------------------------
    async def step(self) -> StepResult:
        if self.paused or self._stopping:
            self.state = "paused" if self.paused else "stopping"
            self._spell.clear()
            return StepResult.PAUSED
        if self._clock() < self.backoff_until:
            self.state = "backoff"
            self._spell.clear()
            return StepResult.BACKOFF
        if await self.channel.is_busy():
            self.state = "busy"
            self._spell.busy(self.channel.busy_reason() or "busy", self._clock())
            return StepResult.BUSY
        self._spell.clear()
        s = self.settings
        batch = await self._store.claim(
            self.agent.name,
            max_messages=s.batch_max_messages,
            max_chars=s.batch_max_chars,
            lease_s=s.lease_s,
            now=self._wall(),
        )
        if batch is None:
            self.state = "idle"
            return StepResult.IDLE
        # No checkpoint between the claim returning and this call: the batch cannot leak.
        return await self._attempt(batch)

    async def _attempt(self, batch: Batch) -> StepResult:
        body_limit = max(1000, self.settings.batch_max_chars - _RENDER_OVERHEAD_CHARS)
        text = render_batch(
            batch.messages,
            agent=self.agent.name,
            delivery_id=batch.delivery_id,
            attempt=batch.attempt,
            body_limit=body_limit,
        )
        started = self._clock()
        self.state, self.in_flight = "delivering", batch
        self._spell.busy("in turn", started, fresh=True)
        self._confirmed, self.quiet = False, anyio.Event()
        try:
            try:
                outcome = await self._deliver(batch, text)
            except BaseException:
                # Cancelled from outside (shutdown, supervisor): settle what we know, then go.
                known = (
                    Outcome(StepResult.DELIVERED)
                    if self._confirmed
                    else Outcome(StepResult.CANCELLED, "cancelled")
                )
                with anyio.CancelScope(shield=True):
                    await self._settle(batch, known, started)
                raise
            with anyio.CancelScope(shield=True):
                result = await self._settle(batch, outcome, started)
        finally:
            self.in_flight = None
            self._spell.clear()
            self.quiet.set()
        return result

    async def _deliver(self, batch: Batch, text: str) -> Outcome:
        scope = anyio.CancelScope()
        if self.settings.deliver_timeout_s is not None:
            scope.deadline = anyio.current_time() + self.settings.deliver_timeout_s
        self._deliver_scope, self._aborted = scope, self._abort_reason is not None
        if self._aborted:
            scope.cancel()  # abandoned between the claim and now: nothing is typed
        outcome = Outcome(StepResult.DELIVERED)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._keep_lease, batch.delivery_id)
                with scope:
                    outcome = await self._inject(batch, text)
                tg.cancel_scope.cancel()
        finally:
            self._deliver_scope = None
        if scope.cancelled_caught and not self._confirmed:
            if self._aborted:
                return Outcome(StepResult.CANCELLED, self._abort_reason or "cancelled")
            return Outcome(
                StepResult.TIMEOUT, f"no confirmation within {self.settings.deliver_timeout_s:g}s"
            )
        return outcome

    async def _inject(self, batch: Batch, text: str) -> Outcome:
        try:
            await self.channel.deliver(batch, text)
        # Reasons may quote agent output (a stream-json result); ``storable`` keeps a lone
        # surrogate in it from failing the release that stores the reason.
        except DeliveryFailed as exc:
            return Outcome(StepResult.FAILED, storable(exc.message))
        except AgentBusy as exc:
            return Outcome(StepResult.BUSY, storable(exc.message))
        except AgentUnavailable as exc:
            return Outcome(StepResult.UNAVAILABLE, storable(exc.message))
        except Exception as exc:  # a channel bug must cost one attempt, not the loop
            self._log.exception("delivery.channel_crashed", delivery_id=batch.delivery_id)
            return Outcome(StepResult.FAILED, storable(f"{type(exc).__name__}: {exc}"))
        self._confirmed = True
        return Outcome(StepResult.DELIVERED)

    async def _keep_lease(self, delivery_id: str) -> None:
        """Extend the lease while a long turn runs, so no reaper hands the batch out twice."""
        interval = max(self.settings.lease_s / 3, 0.01)
        while True:
            await anyio.sleep(interval)  # cancelled as soon as the delivery settles
            try:
                kept = await self._store.extend_lease(
                    delivery_id, lease_s=self.settings.lease_s, now=self._wall()
                )
            except AgentmaildError as exc:
                self._log.warning(
                    "delivery.lease_extend_failed", delivery_id=delivery_id, error=exc.message
                )
                continue
            if not kept:
                self._log.warning("delivery.lease_lost", delivery_id=delivery_id)
                return

    # -- bookkeeping (always shielded by the caller) ----------------------------------------
    async def _settle(self, batch: Batch, outcome: Outcome, started: float) -> StepResult:
        result = outcome.result
        spent_s = self._clock() - started
        if result is StepResult.DELIVERED:
            acked = await self._books.ack(batch, duration_s=spent_s)
            self.failures, self.backoff_until = 0, 0.0
            self.delivered_total += 1
            self._remember(batch, result, None)
            self._line(batch, started, "delivery.acked", "info", acked=acked)
            return result
        error = outcome.error or result.value
        self._remember(batch, result, error)
        if result is StepResult.CANCELLED:
            await self._release(batch, outcome, error, spent_s, count=0)
            if self._abort_reason is not None:
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

    # -- the loop ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Step, then wait for a wake-up, the poll interval or stop; until ``stop()``."""
        while not self._stopping:
            result = await self.step()
            if self._stopping:
                break
            timeout = self._wait_after(result)
            if timeout == 0:
                await anyio.lowlevel.checkpoint()
                continue
            await self._wait(deadline_s=timeout)
        self.state = "stopped"

    def _wait_after(self, result: StepResult) -> float | None:
        if result in _AGAIN:
            return 0
        if result in _BACKING_OFF:
            return max(self.backoff_until - self._clock(), 0.001)
        if result is StepResult.PAUSED or (result is StepResult.IDLE and self._gated):
            return None
        return self.settings.poll_interval_s

    async def _wait(self, *, deadline_s: float | None) -> None:
        event = self._wake
        if not event.is_set():
            with anyio.move_on_after(deadline_s if deadline_s is not None else float("inf")):
                await event.wait()
        self._wake = anyio.Event()

    # -- figures ----------------------------------------------------------------------------
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
            "busy": self.state in ("busy", "delivering"),
            "busy_reason": why_not(
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
