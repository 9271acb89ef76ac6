"""The Channel ABC: a transport with a busy signal, one delivery method and aclose()."""

from __future__ import annotations

import abc
from types import TracebackType
from typing import TYPE_CHECKING

from agentmaild.errors import DeliveryFailed
from agentmaild.models import Batch

if TYPE_CHECKING:
    from agentmaild.channels.usage import Usage


class Channel(abc.ABC):
    """Carries rendered batches into one agent's session.

    Contract:
    - ``is_busy()`` is cheap and never raises for "busy"; busy is a result.
    - ``deliver(batch, text)`` returns only once the agent has *confirmed* consumption (the ack
      contract of the channel). It raises ``DeliveryFailed`` when the agent did not take the batch
      and ``AgentUnavailable`` when it cannot take mail at all right now. It may be cancelled;
      the caller releases the batch then.
    - ``interrupt()`` stops the turn that runs now, the channel's own way, and returns once it
      stopped (a few words on how, for the reply and the log); the ``deliver`` of that turn then
      ends (how it ends does not matter: the loop settles the batch as interrupted). It raises
      ``DeliveryFailed`` when the turn could not be stopped. Only where ``interruptible``.
    - ``aclose()`` stops what the channel owns (child processes, readers) and is idempotent.
    """

    kind: str = "abstract"
    # What the last turn cost, where the agent's output says (``channels.usage``); the delivery
    # loop takes it (and sets it back to None) for the delivery history.
    last_usage: Usage | None = None
    interruptible: bool = False

    @abc.abstractmethod
    async def is_busy(self) -> bool: ...

    @abc.abstractmethod
    async def deliver(self, batch: Batch, text: str) -> None: ...

    async def interrupt(self) -> str:
        raise DeliveryFailed(f"the {self.kind} channel cannot interrupt a turn")

    async def aclose(self) -> None:  # most channels own nothing to close
        return None

    def busy_reason(self) -> str | None:
        """Why the last ``is_busy()`` said busy, in a few words for `status` (``hook:busy``)."""
        return None

    def describe(self) -> dict[str, object]:
        """Channel-specific figures for `status` (e.g. unavailable reason, session id)."""
        return {}

    async def __aenter__(self) -> Channel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
