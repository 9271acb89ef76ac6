"""``http.local``'s two checks on real sockets: which ``Host`` names are loopback ones, and the
uid the kernel's TCP table gives for the client end of a real loopback connection."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from agentmaild.http import local
from agentmaild.http.local import check_available, loopback_host

# Both ways the kernel is asked: netlink sock_diag (the one used) and the /proc table (fallback).
LOOKUPS = pytest.mark.parametrize("peer_uid", [local.peer_uid, local._diag_uid, local._table_uid])


@pytest.mark.parametrize(
    ("header", "ok"),
    [("127.0.0.1:8025", True), ("127.0.0.1", True), ("127.9.9.9:1", True), ("localhost:80", True),
     ("LOCALHOST", True), ("[::1]:8025", True), ("[::1]", True), ("::1", True),
     ("evil.example:8025", False), ("127.0.0.1.evil.example", False), ("localhost.evil", False),
     ("10.0.0.1:8025", False), ("[::ffff:10.0.0.1]:1", False), ("", False), (None, False),
     ("0.0.0.0:8025", False)],
)  # fmt: skip
def test_loopback_host_names(header: str | None, ok: bool) -> None:
    assert loopback_host(header) is ok


@contextmanager
def _connection(family: socket.AddressFamily, host: str) -> Iterator[tuple[socket.socket, ...]]:
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind((host, 0))
    server.listen(1)
    client = socket.socket(family, socket.SOCK_STREAM)
    client.connect(server.getsockname()[:2])
    accepted, _ = server.accept()
    try:
        yield client, accepted
    finally:
        for s in (client, accepted, server):
            s.close()


@LOOKUPS
def test_the_client_end_of_a_loopback_connection_is_ours(peer_uid: Callable[..., object]) -> None:
    check_available()
    with _connection(socket.AF_INET, "127.0.0.1") as (_client, accepted):
        peer, ours = accepted.getpeername(), accepted.getsockname()
        assert peer_uid(peer, ours) == os.geteuid()
        assert peer_uid(ours, peer) == os.geteuid()  # the server's own end, looked up the same way
        assert peer_uid((peer[0], peer[1] ^ 1), ours) is None  # no such connection: unknown


@LOOKUPS
def test_an_ipv6_loopback_connection_is_found(peer_uid: Callable[..., object]) -> None:
    with _connection(socket.AF_INET6, "::1") as (_client, accepted):
        assert peer_uid(accepted.getpeername()[:2], accepted.getsockname()[:2]) == os.geteuid()


@LOOKUPS
def test_an_ipv6_client_reaching_an_ipv4_listener_is_found(peer_uid: Callable[..., object]) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    client.connect(("::ffff:127.0.0.1", server.getsockname()[1]))
    accepted, peer = server.accept()
    try:
        assert peer_uid(peer, accepted.getsockname()) == os.geteuid()
    finally:
        for s in (client, accepted, server):
            s.close()
