"""StoreLocation, the backend as a value: kinds, redaction, the local state path, opening a
store, and the callers that name a store to a child, a socket or a person through it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmaild.channels.commands import child_env
from agentmaild.channels.factory import make_channel
from agentmaild.channels.spawn import SpawnChannel
from agentmaild.config import Config
from agentmaild.control.protocol import socket_path_for
from agentmaild.errors import StoreError, UsageError
from agentmaild.models import Agent
from agentmaild.store.kinds import check_integrity, open_store, recovery_hint
from agentmaild.store.location import (
    MEMORY,
    POSTGRES,
    SQLITE,
    StoreLocation,
    resolve_location,
)
from agentmaild.store.memory import MemoryMailStore
from agentmaild.store.sqlite import SqliteMailStore

SECRET = "s3cr3t-pw"
DSNS = (
    f"postgresql://alice:{SECRET}@db.example:5433/mail",
    f"postgres://alice:{SECRET}@db.example/mail?sslmode=require",
    f"postgresql://alice@db.example/mail?password={SECRET}",
    f"postgresql://alice:{SECRET}%40x@[::1]:5432/mail",
)


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def test_kinds(tmp_path: Path) -> None:
    file = StoreLocation.of(tmp_path / "mail.db")
    assert (file.kind, file.target, file.is_file) == (SQLITE, str(tmp_path / "mail.db"), True)
    assert file.local_path == tmp_path / "mail.db" and file.state_dir == tmp_path
    assert not file.shared_by_hosts
    for dsn in DSNS:
        server = StoreLocation.of(dsn)
        assert (server.kind, server.target, server.is_file) == (POSTGRES, dsn, False)
        assert server.shared_by_hosts
    memory = StoreLocation.memory()
    assert (memory.kind, memory.is_file, memory.shared_by_hosts) == (MEMORY, False, False)
    assert StoreLocation.of(file) is file  # a location is its own
    home = StoreLocation.of("~/x/mail.db")
    assert home.target == os.path.expanduser("~/x/mail.db")


def test_equal_by_kind_and_target_and_immutable(tmp_path: Path) -> None:
    a, b = StoreLocation.of(str(tmp_path / "m.db")), StoreLocation.of(tmp_path / "m.db")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != StoreLocation.of(tmp_path / "other.db")
    with pytest.raises(AttributeError, match="immutable"):
        a.target = "elsewhere"  # type: ignore[misc]


@pytest.mark.parametrize("dsn", DSNS)
def test_redaction_never_shows_the_password(dsn: str) -> None:
    location = StoreLocation.of(dsn)
    for text in (location.shown, repr(location), str(location), str(location.local_path)):
        assert SECRET not in text, text
    assert location.shown.startswith("postgresql://alice@")
    assert "db.example" in location.shown or "::1" in location.shown


def test_local_path_is_stable_and_names_no_password(state_home: Path) -> None:
    dsn = DSNS[0]
    first = StoreLocation.of(dsn)
    assert first.local_path == first.local_path  # computed once, then kept
    again = StoreLocation.of(dsn).local_path
    assert first.local_path == again
    assert again.name == "store.pg" and again.parent.parent == state_home / "agentmaild"
    other_password = StoreLocation.of(dsn.replace(SECRET, "rotated")).local_path
    assert other_password == again  # the hash names server, port, database and user only
    assert StoreLocation.of(dsn.replace("/mail", "/other")).local_path != again
    assert StoreLocation.of(dsn).state_dir == again.parent


def test_open_picks_the_store_class(tmp_path: Path) -> None:
    location = StoreLocation.of(tmp_path / "mail.db")
    with pytest.raises(StoreError):
        open_store(location, readonly=True)  # read-only never creates
    assert not (tmp_path / "mail.db").exists()
    store = open_store(location)
    try:
        assert isinstance(store, SqliteMailStore) and store.location == location
    finally:
        store.close()
    memory = open_store(StoreLocation.memory())
    assert isinstance(memory, MemoryMailStore) and memory.location == StoreLocation.memory()


def test_check_integrity_of_a_file(tmp_path: Path) -> None:
    location = StoreLocation.of(tmp_path / "mail.db")
    with pytest.raises(StoreError, match="no store"):
        check_integrity(location)
    open_store(location).close()
    report = check_integrity(location)
    assert report.ok and report.engine == "sqlite" and report.kind() == "quick_check"
    assert "sqlite3 mail.db .recover" in recovery_hint(report)


def test_open_picks_the_postgres_store(pg_dsn: str) -> None:
    from agentmaild.store.postgres import PostgresMailStore

    location = StoreLocation.of(pg_dsn)
    store = open_store(location)
    try:
        assert isinstance(store, PostgresMailStore) and store.location == location
        assert store.get_agent("nobody") is None
    finally:
        store.close()
    report = check_integrity(location)
    assert report.engine == "postgresql" and "restore the database" in recovery_hint(report)


def test_checked_refuses_an_unparsable_dsn(tmp_path: Path) -> None:
    good = StoreLocation.of(DSNS[0])
    assert good.checked() is good
    assert StoreLocation.of(tmp_path / "m.db").checked().is_file
    with pytest.raises(UsageError, match="not a usable PostgreSQL DSN"):
        StoreLocation.of("postgresql://alice@db.example/mail?bogus_option=1").checked()


def test_resolve_location_order(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    start = str(tmp_path / "project")
    assert resolve_location(None, env, start).target.endswith("/.agentmail/mail.db")
    env["AGENTMAILD_STORE_DB"] = DSNS[0]
    assert resolve_location(None, env, start) == StoreLocation.of(DSNS[0])
    env["AGENTMAIL_DB"] = str(tmp_path / "env.db")
    assert resolve_location(None, env, start).target == str(tmp_path / "env.db")
    assert resolve_location("~/flag.db", env, start).target == os.path.expanduser("~/flag.db")


def test_socket_of_a_location(tmp_path: Path) -> None:
    file = StoreLocation.of(tmp_path / "mail.db")
    assert socket_path_for(file) == socket_path_for(tmp_path / "mail.db")
    server = StoreLocation.of(DSNS[0])
    assert socket_path_for(server) == socket_path_for(server.local_path)
    assert socket_path_for(server, tmp_path / "given.sock") == tmp_path / "given.sock"


def test_a_child_is_given_the_target_and_logs_stay_local(tmp_path: Path) -> None:
    server = StoreLocation.of(DSNS[0])
    env = child_env({"CLAUDECODE": "1"}, agent="bob", db=server, delivery_id="dlv-1")
    assert env == {"AGENTMAIL_AGENT": "bob", "AGENTMAIL_DB": DSNS[0], "AGENTMAIL_DELIVERY": "dlv-1"}
    agent = Agent(name="bob", capability="builder", channel="spawn", command=("x",))
    channel = make_channel(agent, Config(), server)
    assert isinstance(channel, SpawnChannel)
    assert channel.store == server and channel.log_path.parent == server.state_dir / "logs"
    relative = SpawnChannel(agent, Config(), Path("rel/mail.db"))  # a file: made absolute
    assert relative.store.target == str(Path("rel/mail.db").absolute())
