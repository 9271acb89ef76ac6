"""``python -m agentmaild.hot.mcp_relay --agent NAME``: the MCP server a spawned turn starts,
relayed to the daemon that spawned it.

A vendor CLI starts its MCP servers before its first model request and waits for them, and
``agentmaild mcp`` spends most of a second loading the ``mcp`` SDK before it answers. The spawn
presets start this instead: stdlib only, it connects to the daemon's MCP socket (``<control
socket>.mcp``, served by ``mcpserver.hosted`` with the SDK loaded once) and copies bytes both
ways, so the turn's tools are the same ``MailServer`` over one more hop. The store is the turn's
(``AGENTMAIL_DB``), and so is the daemon. With no daemon there (or a socket that is not ours), it
becomes ``agentmaild mcp --agent NAME`` in place (``exec``): the same server, started cold.

The first line sent names the agent (``{"agent": NAME}``); the daemon accepts only peers of its
own uid, who could as well start ``agentmaild mcp --agent NAME`` themselves.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from typing import NoReturn

_CHUNK = 65536


def _usage(message: str) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(2)


def mcp_socket_of(control: str) -> str:
    """The daemon's MCP socket, beside its control socket (as its wake socket is)."""
    return f"{control}.mcp"


def _connect(agent: str) -> socket.socket | None:
    """A connection to the daemon's MCP socket, the agent named; None when there is none to use."""
    from agentmaild.control.peer import check_server, check_socket_file
    from agentmaild.control.protocol import socket_path_for
    from agentmaild.errors import AgentmaildError
    from agentmaild.store.location import resolve_location

    sock: socket.socket | None = None
    try:
        path = mcp_socket_of(str(socket_path_for(resolve_location(None))))
        check_socket_file(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(2.0)
        sock.connect(path)
        check_server(sock, path)
        sock.settimeout(None)
        sock.sendall(json.dumps({"agent": agent}).encode() + b"\n")
        return sock
    except (AgentmaildError, OSError):
        if sock is not None:
            sock.close()
        return None


def _upstream(sock: socket.socket) -> None:
    """stdin → daemon; at the client's EOF, half-close so the daemon ends the session."""
    try:
        while chunk := os.read(0, _CHUNK):
            sock.sendall(chunk)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def relay(sock: socket.socket) -> None:
    """Copy bytes both ways until the daemon's side ends."""
    threading.Thread(target=_upstream, args=(sock,), daemon=True).start()
    try:
        while chunk := sock.recv(_CHUNK):
            view = memoryview(chunk)
            while view:
                view = view[os.write(1, view) :]
    except OSError:
        pass


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "--agent":
        _usage("usage: python -m agentmaild.hot.mcp_relay --agent NAME")
    from agentmaild.errors import ValidationError
    from agentmaild.ids import check_name

    try:
        agent = check_name(args[1], "agent (--agent)")
    except ValidationError as exc:
        _usage(exc.message)
    sock = _connect(agent)
    if sock is None:  # no daemon to lean on: the cold server, same argv shape as the presets'
        exe = sys.executable
        os.execv(exe, [exe, "-m", "agentmaild", "mcp", "--agent", agent])
    with sock:
        relay(sock)


if __name__ == "__main__":
    main()
