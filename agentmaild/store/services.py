"""What a daemon needs from its store's backend for one host, behind one ABC: the one place a
daemon's backend is chosen (``open_services``), and a sender's wake-up seam (``wakes_for``).

``DaemonServices`` gives the daemon, in order: ``hold()`` (the checks and the one-daemon lock,
before the event loop starts), ``open_store()`` (the async store), ``open_gate()`` (the poll
gate, whose ``changed()`` reads the store's change mark), ``wakes`` (``store.wake``), the
background ``tasks(daemon)`` the backend needs while serving, the ``outages`` record ``status``
shows, and ``abandon(store)`` once the store was lost under the daemon. The daemon never asks
which backend it has:

- a store file (``services_sqlite``): a file lock beside the store, a private directory, hard
  link and ``quick_check`` checks, one connection with inline writes, a ``PRAGMA data_version``
  gate, datagram wakes, a WAL checkpointer and a watch that the path still names the file;
- PostgreSQL (``services_postgres``): an advisory lock per host kept across database restarts,
  a heartbeat row, an ``xmax`` gate, LISTEN/NOTIFY wakes, the outages the daemon lived through.

Stdlib only at import: ``wakes_for`` runs on the CLI's ``send`` path.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from agentmaild.store.location import StoreLocation
from agentmaild.store.wake import Wakes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from contextlib import AbstractContextManager
    from typing import Protocol

    import anyio

    from agentmaild.config import Config
    from agentmaild.store.aio import AsyncMailStore, Gate

    class Served(Protocol):
        """What a backend's background tasks may ask of the daemon they serve."""

        config: Config
        store: AsyncMailStore

        @property
        def shutdown_event(self) -> anyio.Event: ...

        def request_shutdown(self) -> None: ...

        def lose_store(self, how: str) -> None:
            """The store's path no longer names the store opened (``"replaced"``/``"deleted"``)."""


class DaemonServices(ABC):
    """One daemon's view of its backend, for ``location`` served by ``config``."""

    facade: Any  # the async store's class, over the sync store (a benchmark stamps its calls)

    def __init__(self, location: StoreLocation, config: Config, path: Path) -> None:
        self.location = location
        self.config = config
        # The store's path on this machine: the control socket and the agents' logs live beside.
        self.path = path
        self.socket = config.daemon.socket or _socket_for(path)
        self.host: str | None = None  # on a store shared by hosts: the one this daemon serves
        self.outages: Any = None  # what broke and when (``store.postgres_outages.Outages``)

    @property
    def target(self) -> str:
        """What names the store to an agent this daemon starts (its ``AGENTMAIL_DB``)."""
        return self.location.target

    @property
    @abstractmethod
    def wakes(self) -> Wakes:
        """How senders wake this daemon (``store.wake``)."""

    @abstractmethod
    def hold(self) -> AbstractContextManager[None]:
        """The checks and the one-daemon lock, held while the daemon runs; ``AgentmaildError``
        (naming the holder) when it cannot start."""

    @abstractmethod
    async def open_store(self) -> AsyncMailStore: ...

    @abstractmethod
    async def open_gate(self) -> Gate: ...

    def tasks(self, daemon: Served) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        """The backend's background tasks, run in the daemon's task group until it ends."""
        return []

    async def abandon(self, store: AsyncMailStore) -> None:
        """After ``lose_store``: what the store opened still needs before the daemon exits
        (nothing, unless the backend says otherwise)."""
        return None


def _socket_for(path: Path) -> Path:
    from agentmaild.control.protocol import socket_path_for

    return socket_path_for(path)
