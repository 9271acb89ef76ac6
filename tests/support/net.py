"""Small network helpers the tests share: a free loopback port, and whether a daemon answers."""

from __future__ import annotations

import socket
from pathlib import Path

from agentmaild.control.client import request
from agentmaild.errors import ControlError


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def daemon_answers(sock: Path) -> bool:
    """Whether a daemon answers ``ping`` on its control socket ``sock``."""
    try:
        return bool(request(sock, "ping", timeout=1.0)["pong"])
    except (ControlError, OSError):
        return False
