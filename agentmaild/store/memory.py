"""MemoryMailStore: an in-memory MailStore that behaves like SqliteMailStore, for tests.

Assembled like the SQLite store, one mixin per seam of the ``MailStore`` ABC — ``MemoryMessages``
(``memory_messages``), ``MemoryAgents`` (``memory_agents``), ``MemoryDeliveries``
(``memory_deliveries``), ``MemoryProcs`` (``memory_procs``) — over the dicts and the lock of
``memory_state``.
"""

from __future__ import annotations

from agentmaild.store.base import MailStore
from agentmaild.store.memory_agents import MemoryAgents
from agentmaild.store.memory_deliveries import MemoryDeliveries
from agentmaild.store.memory_messages import MemoryMessages
from agentmaild.store.memory_procs import MemoryProcs

__all__ = ["MemoryMailStore"]


class MemoryMailStore(MemoryMessages, MemoryAgents, MemoryDeliveries, MemoryProcs, MailStore):
    """Dicts behind one lock; every public method is one atomic step, as one SQL transaction is."""
