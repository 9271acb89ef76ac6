"""Fixtures shared by the integration tests: a store file with a lead registered."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import FAST, DaemonProc, daemon_factory


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "mail.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteMailStore]:
    """The store at ``db``, with ``bob`` registered as a lead (the usual sender)."""
    s = SqliteMailStore(db)
    s.add_agent(Agent(name="bob", capability="lead"))
    yield s
    s.close()


@pytest.fixture
def daemons(db: Path, tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    """``make(env=None, start=True)`` → a real ``agentmaild serve`` on ``db`` at test speed."""
    with daemon_factory(db, tmp_path, defaults=FAST, text=True) as make:
        yield make
