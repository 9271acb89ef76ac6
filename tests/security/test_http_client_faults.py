"""Clients that misbehave on the wire, against a real daemon on loopback: a client hanging up
mid-body is one short info line in the log (never an error with a stack trace), and a body that
does not arrive gets its 408 at ``http.request_timeout_s`` with the connection closed then too."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable

from tests.support.daemon import DaemonProc
from tests.support.http_api import base_url, http_env, mint
from tests.support.waiting import wait_for

HANGUPS = 5
TIMEOUT_S = 2.0


def _connect(d: DaemonProc) -> socket.socket:
    host, port = base_url(d).removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=15)


def _head(path: str, token: str | None = None) -> bytes:
    auth = f"authorization: Bearer {token}\r\n" if token else ""
    return (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"{auth}content-length: 100000\r\n\r\n").encode()  # fmt: skip


def test_clients_hanging_up_mid_body_are_one_short_info_line_each(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = daemons(http_env())
    token = mint(d, "operator")
    for i in range(HANGUPS):
        s = _connect(d)
        path, auth = ("/v1/relay", None) if i % 2 == 0 else ("/v1/messages", token)
        s.sendall(_head(path, auth) + b'{"to": "x", "body": "' + b"y" * 500)
        s.close()
        wait_for(lambda n=i: len(d.events("http.client_gone")) > n, 10, f"hang-up {i} logged")
    gone = d.events("http.client_gone")
    assert len(gone) == HANGUPS and {e["level"] for e in gone} == {"info"}
    assert {e["path"] for e in gone} == {"/v1/relay", "/v1/messages"}
    log = d.log.read_text()
    assert "Traceback" not in log and "ClientDisconnect" not in log and '"exception"' not in log
    errors = [line for line in log.splitlines() if '"level": "error"' in line]
    hangups = [line for line in log.splitlines() if '"http.client_gone"' in line]
    assert errors == [] and len(hangups) == HANGUPS and max(map(len, hangups)) < 400
    assert not d.events("relay.refused")  # a hang-up is not a refused envelope
    assert d.alive()


def _answer_and_close(s: socket.socket, began: float, trickle: bool) -> tuple[bytes, float, float]:
    """Read until the server closes (sending a body byte every 0.1 s when ``trickle``): what it
    answered, when its first byte came and when it closed, both since ``began``."""
    s.settimeout(0.1)
    answer, first = b"", -1.0
    while time.monotonic() - began < 6 * TIMEOUT_S:
        try:
            if trickle:
                s.sendall(b" ")
            chunk = s.recv(65536)
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            break
        if not chunk:
            break
        if not answer:
            first = time.monotonic() - began
        answer += chunk
    return answer, first, time.monotonic() - began


def test_a_slow_body_gets_its_408_and_the_close_at_the_time_it_names(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = daemons(http_env({"AGENTMAILD_HTTP_REQUEST_TIMEOUT_S": str(TIMEOUT_S)}))
    token = mint(d, "operator")
    for path, trickle in (("/v1/relay", True), ("/v1/messages", False), ("/v1/relay", False)):
        s = _connect(d)
        began = time.monotonic()
        s.sendall(_head(path, token) + b"{")
        answer, first, closed = _answer_and_close(s, began, trickle)
        s.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"connection: close" in head.lower()
        message = json.loads(body)["error"]["message"]
        assert message == f"the request body did not arrive within {TIMEOUT_S:g}s"
        assert TIMEOUT_S - 0.2 <= first <= closed < TIMEOUT_S + 1.0, (path, trickle, first, closed)
    assert d.alive()
