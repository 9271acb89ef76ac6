"""A synchronous control client: one request, one reply, stdlib sockets only.

No anyio, structlog or typer here: the CLI's ``send`` pokes the daemon after every commit and the
hook fast path may ask it questions, so importing and using this must cost a few milliseconds.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from agentmaild.control.peer import check_server, check_socket_file
from agentmaild.control.protocol import MAX_RESPONSE_BYTES, decode_response, encode_request
from agentmaild.errors import ControlError, DaemonNotAnswering, DaemonNotRunning, ProtocolError

POKE_CONNECT_TIMEOUT_S = 0.05
POKE_TIMEOUT_S = 0.25
# The daemon's wake socket: a datagram socket beside the control socket (``<path>.wake``). A wake
# datagram is ``amw1*`` (every agent) or ``amw1`` + ``\n<name>`` per agent; nothing answers it.
WAKE_SUFFIX = ".wake"
WAKE_MAGIC = b"amw1"
WAKE_MAX_BYTES = 16384


def request(
    path: Path | str,
    cmd: str,
    args: dict[str, Any] | None = None,
    timeout: float = 2.0,
    *,
    connect_timeout: float | None = None,
) -> dict[str, Any]:
    """Send ``cmd`` to the daemon listening on ``path`` and return its ``result``.

    ``timeout`` bounds the whole exchange; ``connect_timeout`` (default ``timeout``) the connect.
    Nothing is sent unless the socket file and the listening process are both our uid's.
    Raises ``DaemonNotRunning`` when nothing listens there, ``DaemonNotAnswering`` on a timeout,
    ``ControlError`` for an error reply (its ``code`` is the daemon's) or a socket that is not ours,
    and ``ProtocolError`` for a malformed exchange.
    """
    data = encode_request(cmd, args)
    deadline = time.monotonic() + timeout
    where = os.fspath(path)
    check_socket_file(where)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        _connect(sock, where, min(timeout, connect_timeout or timeout))
        check_server(sock, where)
        try:
            sock.settimeout(_remaining(deadline))
            sock.sendall(data)
            line = _read_line(sock, deadline)
        except TimeoutError as exc:
            message = f"the daemon did not answer {cmd!r} within {timeout}s"
            raise DaemonNotAnswering(message) from exc
        except OSError as exc:
            raise ControlError(f"control connection to {path} failed: {exc}") from exc
    return decode_response(line)


def poke(path: Path | str, agents: list[str] | None = None) -> bool:
    """Best-effort ``wake`` (all agents when ``agents`` is None); True if the daemon took it.

    One datagram to the daemon's wake socket when it has one (no reply awaited: ~0.1 ms); else
    a ``wake`` request on the control socket. Never raises nor logs, not even for a socket that is
    not ours: mail is already committed and the daemon polls anyway.
    """
    if send_wake(path, agents):
        return True
    args: dict[str, Any] = {} if agents is None else {"agents": list(agents)}
    try:
        request(path, "wake", args, POKE_TIMEOUT_S, connect_timeout=POKE_CONNECT_TIMEOUT_S)
    except Exception:  # best effort by contract; the daemon's poll interval covers a lost poke
        return False
    return True


def encode_wake(agents: list[str] | None) -> bytes:
    if agents is None:
        return WAKE_MAGIC + b"*"
    return WAKE_MAGIC + b"".join(b"\n" + name.encode("utf-8", "replace") for name in agents)


def send_wake(path: Path | str, agents: list[str] | None = None) -> bool:
    """One wake datagram to ``<path>.wake``, non-blocking; False when it could not be sent.

    False (the caller falls back to a ``wake`` request) when the socket is missing, not ours,
    refused (no daemon bound it), or the datagram would be too large. A full queue (EAGAIN) is
    True: the daemon is behind, and a drain that finds its queue full re-checks every agent.
    """
    data = encode_wake(agents)
    if len(data) > WAKE_MAX_BYTES:
        return False
    target = os.fspath(path) + WAKE_SUFFIX
    try:
        check_socket_file(target)  # a socket file of our uid, or nothing is sent
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(data, target)
    except BlockingIOError:
        return True  # see above: the daemon will notice the overflow
    except Exception:  # missing, refused, EAGAIN, too long a path: the request poke instead
        return False
    return True


def _connect(sock: socket.socket, path: str, timeout: float) -> None:
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
        raise DaemonNotRunning(f"no agentmaild is listening on {path}") from exc
    except TimeoutError as exc:
        raise DaemonNotAnswering(f"connecting to {path} timed out after {timeout}s") from exc
    except OSError as exc:
        raise ControlError(f"cannot connect to {path}: {exc}") from exc


def _read_line(sock: socket.socket, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(65536)
        if not chunk:
            raise ProtocolError("the daemon closed the connection without a complete reply")
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ProtocolError(f"reply too large (limit {MAX_RESPONSE_BYTES} bytes)")


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left
