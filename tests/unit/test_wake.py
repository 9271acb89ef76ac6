"""The wake socket on real Unix datagram sockets: decoding, coalescing, fallback, re-binding."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentmaild.control import client
from agentmaild.control.server import ControlServer
from agentmaild.control.wake import WakeReceiver, decode_wake

BOUND = 30.0  # only a hang comes close


@pytest.fixture
def sock() -> Iterator[Path]:
    """A control socket path short enough that ``<path>.wake`` fits in sun_path."""
    d = Path(os.path.realpath("/tmp")) / f"amw-{os.getpid()}-{time.monotonic_ns()}"
    d.mkdir(mode=0o700)
    yield d / "agentmaild.sock"
    shutil.rmtree(d, ignore_errors=True)


class Woken:
    def __init__(self) -> None:
        self.calls: list[list[str] | None] = []
        self.event = anyio.Event()
        self.overflows = 0

    def __call__(self, names: list[str] | None) -> None:
        self.calls.append(names)
        self.event.set()

    def overflow(self) -> None:
        self.overflows += 1


def receiver_for(sock: Path, woken: Woken, **kw: Any) -> WakeReceiver:
    return WakeReceiver(sock, woken, woken.overflow, **kw)


def raw_send(path: Path, data: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(data, os.fspath(path))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"amw1\nalice", ["alice"]),
        (b"amw1\nalice\nbob", ["alice", "bob"]),
        (b"amw1*", None),
        (b"amw1", []),
        (b"amw2\nalice", False),  # another magic
        (b"wake alice", False),
        (b"amw1alice", False),  # no separator
        (b"amw1\n\xff\xfe", False),  # not UTF-8
        (b"amw1\nalice\n", False),  # an empty name
        (b"amw1\n" + b"a" * 300, False),  # a name too long
        (b"amw1\n" + b"a\n" * 9000, False),  # a datagram too large
    ],
)
def test_decode_wake(data: bytes, expected: object) -> None:
    if expected is False:
        with pytest.raises(ValueError, match=r"wake|separator|name|utf-8"):
            decode_wake(data)
    else:
        assert decode_wake(data) == expected


def test_encode_round_trips() -> None:
    assert decode_wake(client.encode_wake(["a-1", "b.2"])) == ["a-1", "b.2"]
    assert decode_wake(client.encode_wake(None)) is None


async def test_a_datagram_wakes_the_named_agents(sock: Path) -> None:
    woken = Woken()
    receiver = receiver_for(sock, woken)
    assert receiver.bind()
    assert stat.S_IMODE(receiver.path.stat().st_mode) == 0o600
    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver.run)
        assert await anyio.to_thread.run_sync(client.poke, sock, ["alice", "bob"]) is True
        with anyio.fail_after(BOUND):
            await woken.event.wait()
        tg.cancel_scope.cancel()
    assert woken.calls == [["alice", "bob"]]
    assert not receiver.path.exists()  # removed on exit


async def test_a_burst_of_datagrams_is_one_wake_per_agent(sock: Path) -> None:
    woken = Woken()
    receiver = receiver_for(sock, woken)
    assert receiver.bind()
    try:
        for i in range(6):  # fewer than the kernel queues (net.unix.max_dgram_qlen, >= 10)
            assert client.send_wake(sock, [f"agent-{i % 3}"])
        receiver.drain()
        assert woken.calls == [["agent-0", "agent-1", "agent-2"]]
        assert receiver.received == 6
        assert woken.overflows == 0
        client.send_wake(sock, ["agent-0"])
        client.send_wake(sock, None)  # everyone wins over names
        receiver.drain()
        assert woken.calls[1:] == [None]
        receiver.drain()  # nothing queued: no call
        assert len(woken.calls) == 2
    finally:
        receiver.close()


async def test_a_full_queue_is_taken_and_makes_the_daemon_recheck(sock: Path) -> None:
    woken = Woken()
    receiver = receiver_for(sock, woken)
    assert receiver.bind()
    try:
        # Past the queue limit the sender gets EAGAIN: the datagram is lost, yet taken (True),
        # because the drain that reads the full queue asks for a re-check of every agent.
        assert all(client.send_wake(sock, [f"agent-{i}"]) for i in range(500))
        receiver.drain()
        assert 0 < receiver.received < 500
        assert woken.overflows == 1
        assert woken.calls == [sorted(f"agent-{i}" for i in range(receiver.received))]
    finally:
        receiver.close()


async def test_bad_datagrams_are_ignored_and_the_socket_keeps_working(sock: Path) -> None:
    woken = Woken()
    receiver = receiver_for(sock, woken)
    assert receiver.bind()
    try:
        for junk in (b"", b"GET / HTTP/1.1\r\n", b"amw1\n\xff", b"\x00" * 20000, b"amw1\n\n"):
            try:
                raw_send(receiver.path, junk)
            except OSError:
                pass  # a datagram the kernel refuses as too large never arrives: fine too
        receiver.drain()
        assert woken.calls == []
        assert receiver.ignored >= 4
        assert client.send_wake(sock, ["carol"])
        receiver.drain()
        assert woken.calls == [["carol"]]
    finally:
        receiver.close()


async def test_a_missing_wake_socket_falls_back_to_the_control_request(sock: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def record(cmd: str, args: dict[str, Any]) -> dict[str, Any]:
        seen.append((cmd, args))
        return {}

    assert client.send_wake(sock, ["alice"]) is False  # nothing there
    server = ControlServer(sock, record)
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(BOUND):
            await tg.start(server.serve)
        assert await anyio.to_thread.run_sync(client.poke, sock, ["alice"]) is True
        # A dead daemon's leftover file refuses the datagram: the request again.
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        stale.bind(os.fspath(sock) + client.WAKE_SUFFIX)
        stale.close()
        assert client.send_wake(sock, ["bob"]) is False
        assert await anyio.to_thread.run_sync(client.poke, sock, ["bob"]) is True
        tg.cancel_scope.cancel()
    assert seen == [("wake", {"agents": ["alice"]}), ("wake", {"agents": ["bob"]})]


def test_a_wake_path_that_is_not_a_socket_is_neither_used_nor_replaced(sock: Path) -> None:
    wake = Path(os.fspath(sock) + client.WAKE_SUFFIX)
    wake.write_text("mine")
    assert client.send_wake(sock, ["alice"]) is False
    receiver = receiver_for(sock, Woken())
    assert receiver.bind() is False
    assert wake.read_text() == "mine"


def test_a_stale_wake_socket_is_replaced_on_bind(sock: Path) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stale.bind(os.fspath(sock) + client.WAKE_SUFFIX)
    stale.close()
    woken = Woken()
    receiver = receiver_for(sock, woken)
    try:
        assert receiver.bind()
        assert client.send_wake(sock, ["dave"])
        receiver.drain()
        assert woken.calls == [["dave"]]
    finally:
        receiver.close()


async def test_a_removed_wake_socket_is_bound_again(sock: Path) -> None:
    woken = Woken()
    receiver = receiver_for(sock, woken, check_interval_s=0.01)
    assert receiver.bind()
    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver.run)
        receiver.path.unlink()
        with anyio.fail_after(BOUND):
            # The re-bind runs on the receiver's own timer: the file coming back is the event.
            while not client.send_wake(sock, ["erin"]):  # noqa: ASYNC110
                await anyio.sleep(0.01)
            await woken.event.wait()
        tg.cancel_scope.cancel()
    assert woken.calls == [["erin"]]
