"""The daemon takes its control socket back when the file is removed or replaced (real daemon)."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProc, daemon_factory
from tests.support.sockets import Impostor
from tests.support.waiting import wait_for

REBIND_S = 20.0  # the daemon looks every second; the bound only catches "never"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProc]:
    with daemon_factory(tmp_path / "store" / "mail.db", tmp_path, defaults={}, text=True) as make:
        yield make()


def pinged_by_the_cli(d: DaemonProc) -> bool:
    done = d.cli("--json", "ctl", "ping", timeout=10)
    if done.returncode != 0:
        return False
    assert d.proc is not None
    return bool(done.stdout) and f'"pid": {d.proc.pid}' in done.stdout


def rebound(d: DaemonProc, reason: str) -> bool:
    return any(e.get("reason") == reason for e in d.events("control.socket_rebound"))


def test_a_deleted_socket_is_bound_again(daemon: DaemonProc) -> None:
    os.unlink(daemon.sock)
    wait_for(lambda: rebound(daemon, "missing"), REBIND_S, "control.socket_rebound")
    assert stat.S_IMODE(os.lstat(daemon.sock).st_mode) == 0o600
    assert pinged_by_the_cli(daemon)
    # ... and again: the watch goes on after a re-bind.
    os.unlink(daemon.sock)
    wait_for(lambda: len(daemon.events("control.socket_rebound")) == 2, REBIND_S, "second rebind")
    assert pinged_by_the_cli(daemon)


def test_a_dead_socket_in_its_place_is_replaced(daemon: DaemonProc) -> None:
    os.unlink(daemon.sock)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(daemon.sock))
    dead.close()  # a socket file nobody listens on
    wait_for(lambda: rebound(daemon, "stale"), REBIND_S, "control.socket_rebound")
    assert pinged_by_the_cli(daemon)


def test_an_impostor_in_its_place_is_replaced_and_told_nothing(daemon: DaemonProc) -> None:
    impostor = Impostor(daemon.sock, "foreign-peer")
    try:
        wait_for(lambda: rebound(daemon, "foreign_server"), REBIND_S, "control.socket_rebound")
        assert pinged_by_the_cli(daemon)
    finally:
        received = impostor.received()
    assert all(got == "" for got in received), received  # the daemon only looked at its uid


def test_a_file_in_its_place_is_never_removed(daemon: DaemonProc) -> None:
    os.unlink(daemon.sock)
    daemon.sock.write_text("precious")
    wait_for(lambda: daemon.events("control.socket_blocked"), REBIND_S, "control.socket_blocked")
    assert daemon.sock.read_text() == "precious"
    assert daemon.cli("ctl", "ping").returncode == 1
    daemon.sock.unlink()  # the user cleared it: the daemon takes the path back
    wait_for(lambda: rebound(daemon, "missing"), REBIND_S, "control.socket_rebound")
    assert pinged_by_the_cli(daemon)
