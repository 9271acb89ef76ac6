"""Fixtures shared by the delivery-loop unit tests: a real SQLite store with a spawn agent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteMailStore]:
    """``alice`` (spawn) receives, ``bob`` (lead) sends."""
    s = SqliteMailStore(tmp_path / "mail.db")
    s.add_agent(Agent(name="alice", capability="builder", channel="spawn"))
    s.add_agent(Agent(name="bob", capability="lead"))
    yield s
    s.close()
