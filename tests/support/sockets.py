"""Hostile peers of the control socket as real processes: an impostor server and a flooder."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentmaild.control.protocol import fallback_dir
from agentmaild.control.server import ensure_private_dir

SUPPORT = Path(__file__).resolve().parent
NOBODY = 65534


def prepare_socket_dir(sock: Path) -> None:
    """The directory the socket goes in, as the daemon would make it."""
    if sock.parent == fallback_dir():
        ensure_private_dir(sock.parent)
    else:
        sock.parent.mkdir(parents=True, exist_ok=True)


class _Helper:
    """A support script as a subprocess that prints a first line once it is set up."""

    def __init__(self, script: str, *args: str, ready: str) -> None:
        assert os.geteuid() == 0, "these tests act as another uid and need root (CI runs as root)"
        self.proc = subprocess.Popen(
            [sys.executable, str(SUPPORT / script), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], 20)
        first = self.proc.stdout.readline() if readable else ""
        if not first.startswith(ready):
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
            raise AssertionError(f"{script} did not start: {first!r} {err}")
        self.first = first

    def finish(self) -> list[str]:
        """Stop it; the lines it printed after the first."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=20)
        return out.splitlines()


class Impostor(_Helper):
    """``socket_impostor.py``: replaces ``path`` with its own listening socket (see its usage)."""

    def __init__(self, path: Path, mode: str, reply: str | None = None) -> None:
        prepare_socket_dir(path)
        extra = [reply] if reply else []
        super().__init__("socket_impostor.py", str(path), mode, *extra, ready="ready")

    def received(self) -> list[str]:
        """What each client that connected sent it (``""``: connected and sent nothing)."""
        return [json.loads(line)["got"] for line in self.finish()]


class Flooder(_Helper):
    """``socket_flooder.py``: ``count`` idle connections to ``path``, re-opened once closed."""

    def __init__(self, path: Path, count: int) -> None:
        super().__init__("socket_flooder.py", str(path), str(count), ready="ready")

    def stats(self) -> dict[str, Any]:
        lines = self.finish()
        assert lines, "the flooder printed no statistics"
        return dict(json.loads(lines[-1]))


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = fn(*args, **kwargs)
    return result, time.monotonic() - started
