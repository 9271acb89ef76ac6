"""Agent log files: where an agent's output log lives and the size-bounded ``RotatingLog``."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import BinaryIO, Protocol

import structlog
from structlog.typing import FilteringBoundLogger


class LoggedLine(Protocol):
    """What a log needs of a line of output (``procs.lines.Line`` is one)."""

    @property
    def data(self) -> bytes: ...

    @property
    def truncated(self) -> bool: ...

log: FilteringBoundLogger = structlog.get_logger(__name__)


class RotatingLog:
    """Appends to ``path``; past ``max_bytes`` it shifts ``path`` to ``path.1`` … ``path.<keep>``.

    Writes are synchronous: a line is small and bounded, and a thread hop per line would cost more
    than the write. A failing disk disables the log (warned once) rather than failing a delivery.
    """

    def __init__(self, path: Path, *, max_bytes: int, keep: int) -> None:
        self.path = path
        self.max_bytes = max(1, max_bytes)
        self.keep = max(0, keep)
        self._file: BinaryIO | None = None
        self._size = 0
        self._broken = False

    def write(self, data: bytes) -> None:
        if self._broken:
            return
        data = data[: self.max_bytes]
        try:
            if self._file is None:
                self._open()
            if self._size and self._size + len(data) > self.max_bytes:
                self._rotate()
            assert self._file is not None
            self._file.write(data)
            self._file.flush()
            self._size += len(data)
        except OSError as exc:
            self._broken = True
            log.warning("proc.log_failed", path=str(self.path), error=exc.strerror)

    def write_line(self, line: LoggedLine, prefix: bytes = b"") -> None:
        self.write(prefix + line.data + (b" [truncated]\n" if line.truncated else b"\n"))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self) -> None:
        # Private: agent output can hold anything the agent read (keys in files, mail bodies).
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._file = os.fdopen(fd, "ab")
        self._size = self._file.tell()

    def _rotate(self) -> None:
        self.close()
        if self.keep == 0:
            self.path.unlink(missing_ok=True)
        else:
            for n in range(self.keep - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{n}")
                if older.exists():
                    older.replace(self.path.with_name(f"{self.path.name}.{n + 1}"))
            self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        self._open()


def log_path(store_path: Path, agent: str) -> Path:
    """``<store dir>/logs/<agent>.log``, the agent name made safe for a file name."""
    return store_path.parent / "logs" / f"{re.sub(r'[^A-Za-z0-9._-]', '_', agent)}.log"
