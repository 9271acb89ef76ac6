"""The hook's plumbing: its argv, its bounded stdin, its few environment knobs, waking the daemon.

Standard library only, loaded on every hook call.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

STDIN_MAX_BYTES = 1 << 20
OUTPUT_MAX_CHARS = 10_000
WAITING_NOTIFICATIONS = frozenset({"permission_prompt", "elicitation_dialog"})


def parse_opts(argv: Sequence[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    it = iter(argv)
    for arg in it:
        key, sep, value = arg.partition("=")
        if key in ("--agent", "--db", "--vendor"):
            if not sep:
                value = next(it, "")
            opts[key[2:]] = value
    return opts


def read_stdin() -> bytes:
    stream = sys.stdin
    if stream is None or stream.isatty():
        return b""
    data: bytes = stream.buffer.read(STDIN_MAX_BYTES + 1)
    if len(data) <= STDIN_MAX_BYTES:
        return data
    while stream.buffer.read(1 << 16):  # drain, so Claude never writes into a closed pipe
        pass
    return b""  # too large to be a payload we need; treated like an empty one


def notification_waits(data: dict[str, Any]) -> bool:
    kind = data.get("notification_type")
    if isinstance(kind, str) and kind:
        return kind in WAITING_NOTIFICATIONS
    message = data.get("message")  # versions before notification_type: match the text
    return isinstance(message, str) and "permission" in message.lower()


def env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value >= 0 and value == value else default


def poke_daemon(db_path: str, agent: str) -> None:
    """Wake a running daemon so the agent's loop sees the new turn state at once (best effort)."""
    beside = os.path.join(os.path.dirname(os.path.abspath(db_path)), "agentmaild.sock")
    if not os.path.exists(beside) and len(beside) < 100:
        return  # a short path would have put the socket beside the store: no daemon runs
    from pathlib import Path

    from agentmaild.control.client import poke
    from agentmaild.control.protocol import socket_path_for

    poke(socket_path_for(Path(db_path)), [agent])


def output_limit() -> int:
    value = int(env_float("AGENTMAILD_HOOKS_OUTPUT_MAX_CHARS", OUTPUT_MAX_CHARS))
    return min(max(value, 3000), OUTPUT_MAX_CHARS)
