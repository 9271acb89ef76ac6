"""MemoryMailStore: an in-memory MailStore that behaves like SqliteMailStore, for tests.

Assembled like the SQLite store, one mixin per seam of the ``MailStore`` ABC — ``MemoryMessages``,
``MemoryAgents``, ``MemoryDeliveries``, ``MemoryProcs``, ``MemoryHistory``, ``MemoryTokens``,
``MemoryQueues``
(each in its ``memory_*`` module) — over the dicts and the lock of ``memory_state``.
"""

from __future__ import annotations

from agentmaild.store.base import MailStore
from agentmaild.store.location import StoreLocation
from agentmaild.store.memory_agents import MemoryAgents
from agentmaild.store.memory_deliveries import MemoryDeliveries
from agentmaild.store.memory_history import MemoryHistory
from agentmaild.store.memory_messages import MemoryMessages
from agentmaild.store.memory_procs import MemoryProcs
from agentmaild.store.memory_queues import MemoryQueues
from agentmaild.store.memory_tokens import MemoryTokens
from agentmaild.store.memory_trust import MemoryTrust

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
    MailStore,
):
    """Dicts behind one lock; every public method is one atomic step, as one SQL transaction is."""

    location = StoreLocation.memory()
