"""``serve`` refuses a control socket of another uid at start-up and tells it nothing (issue 33
item 8): it neither pings it nor believes it is a daemon of ours, exactly as the CLI refuses it.

The impostor is a real process on the real socket path, as uid 65534 (the socket file chowned to
it, or only the listening server running as it); the daemon is the real ``agentmaild serve``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmaild.control.protocol import socket_path_for
from tests.security.conftest import assert_one_line_error, run_cli
from tests.support.sockets import NOBODY, Impostor


@pytest.mark.parametrize("mode", ["foreign-file", "foreign-peer"])
def test_serve_refuses_a_socket_of_another_uid(db: Path, tmp_path: Path, mode: str) -> None:
    db.parent.mkdir()
    sock = socket_path_for(db)
    impostor = Impostor(sock, mode)
    try:
        done = run_cli(tmp_path, "serve", "--db", str(db))
    finally:
        received = impostor.received()
    line = assert_one_line_error(done, str(sock), f"uid {NOBODY}", "refusing to talk to it")
    assert "already listening" not in line  # never mistaken for an agentmaild of ours
    # foreign-file: never connected; foreign-peer: connected, checked, hung up without a byte.
    assert received == ([] if mode == "foreign-file" else [""]), received
    assert sock.exists()  # not ours to remove
