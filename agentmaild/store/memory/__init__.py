"""MemoryMailStore: the in-memory fake of the ``MailStore``, for tests; it behaves like the SQLite
store and is held to the same contract tests.

Assembled like the SQL stores, one mixin per seam of the ABC, over the dicts and the lock of
``state`` (``atomic``: one lock hold, the fake's transaction): ``messages`` (inserts with their
limits, reads, pulls, purge) with the loop guard of ``rules``, ``deliveries`` (claims, leases, acks,
releases, dead letters), ``agents`` (the registry and the work queues' membership) and ``ledgers``
(processes, tokens, trust peers, the delivery history).
"""

from __future__ import annotations

from agentmaild.store.base import MailStore
from agentmaild.store.location import StoreLocation
from agentmaild.store.memory.agents import MemoryAgents, MemoryQueues
from agentmaild.store.memory.deliveries import MemoryDeliveries
from agentmaild.store.memory.ledgers import MemoryHistory, MemoryProcs, MemoryTokens, MemoryTrust
from agentmaild.store.memory.messages import MemoryMessages
from agentmaild.store.usage import MemoryUsage

__all__ = ["MemoryMailStore"]


class MemoryMailStore(
    MemoryMessages,
    MemoryAgents,
    MemoryDeliveries,
    MemoryProcs,
    MemoryHistory,
    MemoryTokens,
    MemoryTrust,
    MemoryQueues,
    MemoryUsage,
    MailStore,
):
    """Dicts behind one lock; every public method is one atomic step, as one SQL transaction is."""

    location = StoreLocation.memory()
