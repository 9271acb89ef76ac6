"""The wake-up seam: a sender says "new mail for these agents" (``notify``), a daemon hears it
(``run(on_wake)``) — APScheduler's event-broker shape, one implementation per way a store's daemon
is reached, chosen by the store (``store.services``):

- ``DatagramWakes`` (a store file): once its mail is committed, the sender sends one datagram to
  the wake socket beside this machine's daemon's control socket (``control.client.poke``); the
  daemon's side is ``control.wake.WakeReceiver``.
- ``NotifyWakes`` (PostgreSQL): the send's own transaction NOTIFYs its recipients, delivered at
  commit to the daemon of every host LISTENing (``store.postgres_listen``). That NOTIFY *is* the
  wake, so ``notify`` after the commit does nothing: a local poke as well would wake the daemon
  twice for one send.

``on_wake(names)`` is called with the agents that have new mail, or with None when wake-ups may
have been lost (a full datagram queue, a LISTEN connection re-made, a registry change): the daemon
then asks the store which agents have mail. Stdlib only at import: the CLI's ``send``
(``fast_send``) calls ``notify`` after every commit.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import TaskStatus


OnWake = Callable[[list[str] | None], object]  # what it returns is ignored


class Wakes(ABC):
    """One store's wake-ups: ``notify`` (senders, sync, never blocks nor raises) and ``run``
    (the daemon, until cancelled)."""

    @abstractmethod
    def notify(self, agents: list[str] | None) -> None:
        """After a commit: the daemon serving ``agents`` (None: every agent) should look now."""

    @abstractmethod
    async def run(self, on_wake: OnWake, *, task_status: TaskStatus[None] | None = None) -> None:
        """Call ``on_wake`` per wake-up until cancelled; ``task_status.started()`` once senders
        can reach this daemon."""


class DatagramWakes(Wakes):
    """A store file's wake-ups: a datagram to ``<control socket>.wake`` on this machine."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def notify(self, agents: list[str] | None) -> None:
        if not os.path.exists(self.socket):  # no daemon on this machine: it polls when it starts
            return
        from agentmaild.control.client import poke

        poke(self.socket, agents)

    async def run(self, on_wake: OnWake, *, task_status: TaskStatus[None] | None = None) -> None:
        from agentmaild.control.wake import WakeReceiver

        def overflowed() -> None:  # some senders' datagrams were dropped: everyone looks
            on_wake(None)

        receiver = WakeReceiver(self.socket, on_wake, overflowed)
        try:
            receiver.bind()
            if task_status is not None:
                task_status.started()
            await receiver.run()
        finally:
            receiver.close()
