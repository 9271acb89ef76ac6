"""The wake-up seam (``store.wake``) and the change mark (``store.marks``) on real sockets and a
real SQLite store: a sender's ``notify`` reaches the daemon's ``run`` as one wake-up; a store
file's senders get datagrams, a PostgreSQL store's none (its commit NOTIFYs); a store's mark moves
when another connection commits and only then."""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agentmaild.models import Agent
from agentmaild.store.kinds import wakes_for
from agentmaild.store.location import StoreLocation
from agentmaild.store.memory import MemoryMailStore
from agentmaild.store.postgres_listen import NotifyWakes
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.store.wake import DatagramWakes

BOUND = 30.0  # only a hang comes close


@pytest.fixture
def sock() -> Iterator[Path]:
    """A control socket path short enough that ``<path>.wake`` fits in sun_path."""
    d = Path(os.path.realpath("/tmp")) / f"amws-{os.getpid()}-{time.monotonic_ns()}"
    d.mkdir(mode=0o700)
    yield d / "agentmaild.sock"
    shutil.rmtree(d, ignore_errors=True)


def test_a_store_file_senders_wake_its_daemon_by_datagram(sock: Path) -> None:
    woken: list[list[str] | None] = []
    seen = anyio.Event()

    def on_wake(names: list[str] | None) -> None:
        woken.append(names)
        seen.set()

    async def main() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control, \
                anyio.fail_after(BOUND):
            control.bind(str(sock))  # senders poke only a daemon whose control socket is there
            async with anyio.create_task_group() as tg:
                await tg.start(DatagramWakes(sock).run, on_wake)
                sender = wakes_for(StoreLocation.of(sock.parent / "mail.db"), sock)
                assert isinstance(sender, DatagramWakes) and sender.socket == sock
                sender.notify(["alice", "bob"])
                await seen.wait()
                tg.cancel_scope.cancel()

    anyio.run(main)
    assert woken == [["alice", "bob"]]
    assert not Path(f"{sock}.wake").exists()  # the receiver removed its socket file


def test_no_daemon_socket_means_no_datagram_and_no_error(sock: Path) -> None:
    DatagramWakes(sock).notify(["alice"])  # nothing listens, nothing is there: a no-op
    assert not sock.exists() and not Path(f"{sock}.wake").exists()


def test_a_postgres_sender_adds_nothing_to_its_commits_notify(sock: Path) -> None:
    wakes = wakes_for(StoreLocation.of("postgresql://u@127.0.0.1:1/none"), sock)
    assert isinstance(wakes, NotifyWakes)
    wakes.notify(["alice"])  # no server is reached: the NOTIFY went with the commit
    assert not Path(f"{sock}.wake").exists()


def test_a_sqlite_mark_moves_when_another_connection_commits(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    reader, writer = SqliteMailStore(db), SqliteMailStore(db)
    try:
        first = reader.change_mark()
        assert reader.change_mark() == first  # nothing committed: the same mark
        writer.add_agent(Agent(name="alice", capability="builder", channel="spawn",
                               command=("true",)))
        assert reader.change_mark() != first
    finally:
        reader.close()
        writer.close()


def test_a_store_with_no_mark_says_so() -> None:
    assert MemoryMailStore().change_mark() is None  # a watcher looks every time
