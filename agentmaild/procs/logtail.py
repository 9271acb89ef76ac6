"""Reading an agent's log: its last lines, and following it as it grows, across rotation.

``RotatingLog`` (``procs.logfiles``) rotates by renaming the file to ``<name>.1`` and opening a
new one; a follower notices the new file (another inode), drains the old one and moves over.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

_BLOCK = 65536
FOLLOW_POLL_S = 0.2


def _last_lines(f: BinaryIO, end: int, n: int) -> list[bytes]:
    """Up to ``n`` last lines of ``f`` before ``end`` (each with its newline, if it had one)."""
    data = b""
    # Read blocks backwards until n + 1 line breaks are in hand (or the file's start).
    while n > 0 and end > 0 and data.count(b"\n") <= n:
        start = max(0, end - _BLOCK)
        f.seek(start)
        data = f.read(end - start) + data
        end = start
    return data.splitlines(keepends=True)[-n:] if n > 0 else []


def _file_tail(path: Path, n: int) -> tuple[list[bytes], int]:
    try:
        with path.open("rb") as f:
            end = f.seek(0, os.SEEK_END)
            return _last_lines(f, end, n), end
    except FileNotFoundError:
        return [], 0


def tail(path: Path, n: int) -> tuple[bytes, int]:
    """The last ``n`` lines of the log (reaching into the newest rotated file when it is short)
    and the size they end at: where a follower takes over."""
    lines, end = _file_tail(path, n)
    if len(lines) < n:
        older, _ = _file_tail(path.with_name(path.name + ".1"), n - len(lines))
        lines = older + lines
    return b"".join(lines), end


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


class Follower:
    """Copies what is appended to ``path`` to ``out`` from ``offset`` on; ``poll()`` once a tick.

    A missing file is waited for; a replaced file (rotation) is drained, then read from its
    start; a truncated file is read again from its start.
    """

    def __init__(self, path: Path, out: Callable[[bytes], None], offset: int = 0) -> None:
        self.path = path
        self._out = out
        self._file: BinaryIO | None = None
        self._offset = offset

    def poll(self) -> None:
        if self._file is None and not self._open():
            return
        self._drain()
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return  # mid-rotation: the new file appears in a moment
        assert self._file is not None
        if _identity(now) != _identity(os.fstat(self._file.fileno())):
            self._drain()  # the last lines written before the rename
            self.close()
            self._offset = 0
            self._open()
            self._drain()
        elif now.st_size < self._file.tell():
            self._file.seek(0)  # truncated in place
            self._drain()

    def _open(self) -> bool:
        try:
            self._file = self.path.open("rb")
        except FileNotFoundError:
            return False
        self._file.seek(min(self._offset, os.fstat(self._file.fileno()).st_size))
        return True

    def _drain(self) -> None:
        assert self._file is not None
        while chunk := self._file.read(_BLOCK):
            self._out(chunk)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def run(self, poll_s: float = FOLLOW_POLL_S) -> None:
        """Poll forever; the caller ends it (Ctrl-C raises ``KeyboardInterrupt`` out of here)."""
        try:
            while True:
                self.poll()
                time.sleep(poll_s)  # a log has no event to wait on; a tick is what `tail -F` does
        finally:
            self.close()
