"""Stopping an agent's running turn (``agentmaild interrupt``, ``send --interrupt``).

The order is what makes it safe. The interrupt's mail (type ``interrupt``, already in the store)
first joins the batch in flight (``attach_to_delivery``): from then on a daemon killed at any
point leaves a claimed delivery whose lease ends, and the reap hands it back pending, with the
interrupt's mail inside, to be redelivered once. Then the loop is marked ``interrupting`` (what
``status`` shows) and the channel stops the turn its own way (``Channel.interrupt``). Whatever the
stopped turn's ``deliver`` then says, the loop settles that batch as ``interrupted``: released
uncounted (no failure, no backoff), with who asked and why in the delivery history, never acked.
The loop steps again at once and claims the same delivery, attempt + 1: the REDELIVERY marker,
and the interrupt's mail rendered first (``interrupt_first``), in the same session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from agentmaild.errors import AgentmaildError
from agentmaild.mail.vocab import INTERRUPT_TYPE
from agentmaild.models import Message

if TYPE_CHECKING:
    from agentmaild.delivery.loop import DeliveryLoop

log = structlog.get_logger(__name__)

# After the channel stopped the turn: how long to wait for the loop to settle the batch.
_SETTLE_WAIT_S = 10.0


@dataclass(frozen=True, slots=True)
class Interrupting:
    """An interrupt under way: the delivery it stops (None: a turn the daemon did not start)."""

    delivery_id: str | None
    note: str  # the history row's reason: who asked, why, which mail

    def covers(self, delivery_id: str) -> bool:
        return self.delivery_id is None or self.delivery_id == delivery_id


def interrupt_note(by: str, reason: str | None, message_id: str | None) -> str:
    """``interrupted by lead: wrong branch (mail msg-…)``: the reason in the delivery history."""
    why = f": {reason}" if reason else ""
    mail = f" (mail {message_id})" if message_id else ""
    return f"interrupted by {by}{why}{mail}"


def interrupt_first(messages: Sequence[Message]) -> list[Message]:
    """The batch in delivery order with interrupt mail moved to the front (stable)."""
    return sorted(messages, key=lambda m: m.type != INTERRUPT_TYPE)


async def interrupt_turn(
    loop: DeliveryLoop, *, message_id: str | None, by: str, reason: str | None
) -> dict[str, Any]:
    """Stop ``loop``'s running turn; the reply of the control request ``interrupt``."""
    started = time.monotonic()
    batch = loop.in_flight
    if not loop.channel.interruptible:
        return _reply(False, f"the {loop.channel.kind} channel cannot interrupt a turn", started)
    if batch is None and not await loop.channel.is_busy():
        return _reply(False, "no turn is running; the mail opens the next one", started)
    attached = False
    if batch is not None and message_id is not None:
        attached = await loop.store_io.attach_to_delivery(
            message_id, batch.delivery_id, loop.agent.name
        )
    note = interrupt_note(by, reason, message_id)
    settled = loop.quiet  # this turn's: the loop makes a new one for the next
    loop.interrupting = Interrupting(batch.delivery_id if batch else None, note)
    was, loop.state = loop.state, "interrupting"
    bound = log.bind(agent=loop.agent.name, delivery_id=batch.delivery_id if batch else None)
    bound.info("delivery.interrupting", by=by, reason=reason, message_id=message_id)
    try:
        how = await loop.channel.interrupt()
    except AgentmaildError as exc:
        bound.warning("delivery.interrupt_failed", error=exc.message)
        if batch is None:
            loop.interrupting, loop.state = None, was
        return _reply(False, exc.message, started, delivery_id=_id(batch), attached=attached)
    if batch is None:  # a turn with no batch of ours (a TUI's): the mail may go in now
        loop.interrupting, loop.state = None, was
        loop.wake()
    else:
        with anyio.move_on_after(_SETTLE_WAIT_S):
            await settled.wait()
    bound.info("delivery.interrupted_turn", how=how,
               stopped_s=round(time.monotonic() - started, 3))  # fmt: skip
    return _reply(True, how, started, delivery_id=_id(batch), attached=attached)


def _id(batch: Any) -> str | None:
    return batch.delivery_id if batch is not None else None


def _reply(done: bool, detail: str, started: float, **more: Any) -> dict[str, Any]:
    return {"interrupted": done, "detail": detail,
            "stopped_s": round(time.monotonic() - started, 3), **more}  # fmt: skip
