"""What a process scope tells the daemon's process journal (so a crash leaves a record to act on).

Protocols only: the daemon implements them over the store (``daemon.journal``); ``open_child``
and the channels depend on these shapes, not on the store.
"""

from __future__ import annotations

from typing import Protocol


class ScopeRecord(Protocol):
    """One scope's entry: written once the leader runs, removed once the scope stopped it."""

    async def started(self, pid: int, start_time: str) -> None: ...

    async def stopped(self, pid: int, start_time: str) -> None: ...


class ProcJournal(Protocol):
    """The daemon's record of the agent processes it runs."""

    def scope(self, agent: str, delivery_id: str | None) -> ScopeRecord:
        """The record for a scope about to start for ``agent`` (a turn of ``delivery_id``)."""
        ...

    async def held_by(self, agent: str) -> int | None:
        """The pid of a live process an earlier daemon started for ``agent``, if one survives."""
        ...
