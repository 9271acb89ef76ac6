"""Fixtures shared by the integration tests: a store file with a lead registered; a store target
on each backend (``store_target``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import FAST, DaemonProc, daemon_factory
from tests.support.store_targets import STORE_TARGET_KINDS, StoreTarget, target_for


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


@pytest.fixture(params=STORE_TARGET_KINDS)
def store_target(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StoreTarget]:
    """A store on each backend in turn, as a target string: a file under ``tmp_path`` (not yet
    created), or a fresh PostgreSQL database with agentmaild's schema."""
    yield from target_for(request, tmp_path, monkeypatch, migrated=True)


@pytest.fixture(params=STORE_TARGET_KINDS)
def empty_store_target(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StoreTarget]:
    """As ``store_target``, but the PostgreSQL database has no schema yet: on both, no store
    exists until the first write creates it."""
    yield from target_for(request, tmp_path, monkeypatch, migrated=False)
