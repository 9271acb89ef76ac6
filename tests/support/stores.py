"""Small SQLite stores the unit tests start from."""

from __future__ import annotations

from pathlib import Path

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore


def with_bob_and_ended_carol(db: Path) -> SqliteMailStore:
    """A new store at ``db`` (left open) with bob registered and carol registered but completed,
    so a send can meet a recipient that takes mail, one that is ended and one never known."""
    store = SqliteMailStore(db)
    for name in ("bob", "carol"):
        store.add_agent(Agent(name=name, capability="builder"))
    store.set_agent_state("carol", "completed", force=True)
    return store
