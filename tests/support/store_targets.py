"""One store target for a test that runs on both backends: the path or DSN and the child env.

A test written against ``StoreTarget`` names its store only through ``target`` (what a user gives
``--db`` or ``AGENTMAIL_DB``) and asks the location for everything local (the control socket), so
the same body runs on a SQLite file and on a PostgreSQL database without asking which it has.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from agentmaild.control.protocol import socket_path_for
from agentmaild.store.base import MailStore
from agentmaild.store.kinds import open_store
from agentmaild.store.location import StoreLocation
from tests.support.daemon import FAST, base_env
from tests.support.pg import PgDatabases

STORE_TARGET_KINDS = ["sqlite", "postgres"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreTarget:
    """A store named by ``target``; ``env`` runs the CLI or a daemon on it at test speed."""

    kind: str  # "sqlite" or "postgres": only for an expectation where the product really differs
    target: str
    env: dict[str, str]
    state_home: Path  # this machine's XDG_STATE_HOME (a DSN's socket and logs live under it)

    @property
    def location(self) -> StoreLocation:
        return StoreLocation.of(self.target)

    @property
    def socket(self) -> Path:
        """The daemon's control socket for this store on this machine."""
        return socket_path_for(self.location.local_path)

    def open(self) -> MailStore:
        """The store itself, as the product opens it (the caller closes it)."""
        return open_store(self.location)

    def query(self, sql: str) -> list[dict[str, Any]]:
        """The rows of a parameterless SELECT (the same SQL on both stores): a test's look under
        the store's API, at tables the API does not read back."""
        store = self.open()
        try:
            conn = cast(Any, store).connection  # both stores have one; MailStore does not say so
            return [dict(row) for row in conn.execute(sql).fetchall()]
        finally:
            store.close()

    def with_env(self, **extra: str) -> dict[str, str]:
        return {**self.env, **extra}


def make_target(
    tmp_path: Path, kind: str, target: str, defaults: dict[str, str] | None = None
) -> StoreTarget:
    state = tmp_path / "state"
    env = base_env(tmp_path, {"AGENTMAIL_DB": target, "XDG_STATE_HOME": str(state)},
                   FAST if defaults is None else defaults)  # fmt: skip
    return StoreTarget(kind=kind, target=target, env=env, state_home=state)


def target_for(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    migrated: bool,
) -> Iterator[StoreTarget]:
    """The body of a ``store_target`` fixture (``request.param``: the kind). This process's
    XDG_STATE_HOME is the children's, so a DSN's socket path is the same here and in the
    daemon."""
    dsn = None
    if request.param == "postgres":
        databases: PgDatabases = request.getfixturevalue("pg_databases")
        dsn = databases.create(migrated=migrated)
    given = dsn or str(tmp_path / "store" / "mail.db")
    made = make_target(tmp_path, request.param, given)
    monkeypatch.setenv("XDG_STATE_HOME", str(made.state_home))
    yield made
    if dsn:
        databases.drop(dsn)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI as a child process."""
    return subprocess.run([sys.executable, "-m", "agentmaild", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)  # fmt: skip


def ok(env: dict[str, str], *args: str) -> Any:
    """``cli(..., --json)`` that must succeed: its parsed answer."""
    done = cli(env, *args, "--json")
    assert done.returncode == 0, done.stderr or done.stdout
    return json.loads(done.stdout)
