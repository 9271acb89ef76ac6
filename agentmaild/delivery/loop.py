"""DeliveryLoop: step() = busy? → claim → inject → ack/release; run() = step + wait(wake | poll).

The ack contract: a batch is acked only after ``channel.deliver`` returned (the agent confirmed);
on failure or cancellation it is released. Ack and release are bookkeeping and run shielded, so a
shutdown that cancels an injection still gives the batch back. A released batch keeps its
delivery id; after ``max_attempts`` failures it is a dead letter and its senders get an NDR.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import structlog

from agentmaild.delivery.elsewhere import note, split_read_elsewhere
from agentmaild.delivery.figures import LoopFigures
from agentmaild.delivery.interrupt import interrupt_first
from agentmaild.delivery.lease import LeaseKeeper, keep_lease, lease_interval
from agentmaild.delivery.types import Clock, LoopSettings, Outcome, StepResult, wait_after
from agentmaild.errors import AgentBusy, AgentmaildError, AgentUnavailable, DeliveryFailed
from agentmaild.mail.jsoninput import storable
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Batch
from agentmaild.render.framing import render_batch

if TYPE_CHECKING:
    from agentmaild.channels.base import Channel
    from agentmaild.store.aio import AsyncMailStore

log = structlog.get_logger(__name__)

# Rendered text around the bodies (headers, banners, reply hints) stays under this.
_RENDER_OVERHEAD_CHARS = 1500

class DeliveryLoop(LoopFigures):
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
        bound = log.bind(agent=agent.name)
        super().__init__(
            agent.name, store, mailer, settings, clock=clock, wall=wall, rng=rng, log=bound
        )
        self.agent, self.channel = agent, channel
        self._store = self.store_io = store
        self._gated = gated
        self._wake = anyio.Event()
        self._stopping = False
        self._deliver_scope: anyio.CancelScope | None = None
        self._aborted = self._confirmed = False
        self._lease_until = 0.0  # the lease the batch in flight holds (extended during its turn)
        self._more = True  # the last batch's claim may have left mail behind (more_after)
        self._retry_s: float | None = None  # an empty claim's advice: claim again after this
        # A claim failed with the store: it may have committed with its answer lost (the
        # connection died after COMMIT), so a batch of this agent may be claimed by nobody.
        self.claim_unsure = False
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
        if await self._held():  # over its daily budget: looked at again after the poll interval
            return StepResult.BUSY
        if await self.channel.is_busy():
            self.state = "busy"
            self._spell.busy(self.channel.busy_reason() or "busy", self._clock())
            return StepResult.BUSY
        self._spell.clear()
        s = self.settings
        try:
            batch = await self._store.claim(
                self.agent.name,
                max_messages=s.batch_max_messages,
                max_chars=s.batch_max_chars,
                lease_s=s.lease_s,
                now=self._wall(),
            )
        except AgentmaildError:
            self.claim_unsure = True  # the loop ends here; the supervisor re-queues (supervise)
            raise
        if batch is None:
            self.state = "idle"
            self._retry_s = self._store.retry_after(self.agent.name)
            return StepResult.IDLE
        # No checkpoint between the claim returning and this call: the batch cannot leak.
        return await self._attempt(batch)

    async def _attempt(self, batch: Batch) -> StepResult:
        self._more = self._store.more_after(batch)
        body_limit = max(1000, self.settings.batch_max_chars - _RENDER_OVERHEAD_CHARS)
        with anyio.CancelScope(shield=True):  # the claimed batch must reach the try below
            try:
                kept, gone = await split_read_elsewhere(self._store, batch)
            except AgentmaildError as exc:
                # The look is advisory; raising here would leave the batch claimed by nobody
                # until its lease ended. Deliver it whole (the ack then waits for the store).
                self._log.warning(
                    "delivery.recheck_failed", delivery_id=batch.delivery_id, error=exc.message
                )
                kept, gone = batch.messages, []
        started = self._clock()
        if gone:
            self._log.info("delivery.read_elsewhere", delivery_id=batch.delivery_id, ids=gone)
            if not kept:  # nothing left to show: acked (as read elsewhere), no turn spent
                with anyio.CancelScope(shield=True):
                    return await self._settle(batch, Outcome(StepResult.DELIVERED), started)
        text = render_batch(
            interrupt_first(kept),
            agent=self.agent.name,
            delivery_id=batch.delivery_id,
            attempt=batch.attempt,
            body_limit=body_limit,
            banner=note(gone) if gone else "",
        )
        self.state, self.in_flight = "delivering", batch
        self._spell.busy("in turn", started, fresh=True)
        self._confirmed, self.quiet = False, anyio.Event()
        self._lease_until = batch.lease_until
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
                    await self._settle(self._as_leased(batch), known, started)
                raise
            with anyio.CancelScope(shield=True):
                result = await self._settle(self._as_leased(batch), outcome, started)
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
        keeper = LeaseKeeper(self._keep_lease(batch.delivery_id), self._lease_interval())
        try:
            with scope:
                outcome = await self._inject(batch, text)
        finally:
            self._deliver_scope = None
            with anyio.CancelScope(shield=True):
                await keeper.stop()
        # A cancel from outside that came while the channel ran lands here, before the settle
        # (as it did at the task group's exit): _attempt then settles what the channel said.
        await anyio.lowlevel.checkpoint_if_cancelled()
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

    def _as_leased(self, batch: Batch) -> Batch:
        """The batch with the lease it holds now: a long turn's ack or release that meets a
        failing store is retried until the *extended* lease ends, not the first one."""
        return replace(batch, lease_until=max(batch.lease_until, self._lease_until))

    def _lease_interval(self) -> float:
        return lease_interval(self.settings.lease_s)

    async def _keep_lease(self, delivery_id: str) -> None:
        """Extend the lease while a long turn runs, so no reaper hands the batch out twice."""

        def extended(until: float) -> None:
            self._lease_until = until

        await keep_lease(self._store, delivery_id, self.settings.lease_s, self._wall, extended,
                         self._log)

    # -- the loop ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Step, then wait for a wake-up, the poll interval or stop; until ``stop()``."""
        while not self._stopping:
            result = await self.step()
            if self._stopping:
                break
            if result is StepResult.DELIVERED and not self._more:
                self.state = "idle"  # what the empty claim it saves would have said
            timeout = self._wait_after(result)
            if timeout == 0:
                await anyio.lowlevel.checkpoint()
                continue
            await self._wait(deadline_s=timeout)
        self.state = "stopped"

    def _wait_after(self, result: StepResult) -> float | None:
        backoff_left = max(self.backoff_until - self._clock(), 0.001)
        wait = wait_after(result, more=self._more, backoff_left_s=backoff_left, gated=self._gated,
                          poll_interval_s=self.settings.poll_interval_s)
        retry, self._retry_s = self._retry_s, None  # queue work left to members ahead in turn
        return min(wait or retry, retry) if result is StepResult.IDLE and retry else wait

    async def _wait(self, *, deadline_s: float | None) -> None:
        event = self._wake
        if event.is_set():
            pass
        elif deadline_s is None:  # a gated idle loop: no timer to set (most loops, most time)
            await event.wait()
        else:
            with anyio.move_on_after(deadline_s):
                await event.wait()
        self._wake = anyio.Event()

