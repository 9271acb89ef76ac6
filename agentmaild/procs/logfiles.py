"""Agent log files: where an agent's output log lives and the size-bounded ``RotatingLog``.

The log directory sits in the store directory, where an agent (or anyone who can write there) may
plant a symlink or a hard link to a file of ours: a log is only ever opened through a ``logs``
directory that is not a symlink, with ``O_NOFOLLOW``, and kept only when it is a regular file we
own with no other link. Anything else disables that log with a warning; it is never followed.
"""

from __future__ import annotations

import os
import re
import stat
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

# O_NONBLOCK: a FIFO planted as the log must fail the open (ENXIO), not hang the delivery.
_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _Refused(Exception):
    """The log path or its directory is not something we may write to; the reason is the arg."""


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
        except _Refused as exc:
            self._broken = True
            log.warning("proc.log_refused", path=str(self.path), reason=str(exc))
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
        dir_fd = _open_dir(self.path.parent)
        try:
            fd = _open_log(self.path.name, dir_fd)
        finally:
            os.close(dir_fd)
        self._file = os.fdopen(fd, "ab")
        self._size = self._file.tell()

    def _rotate(self) -> None:
        self.close()
        # Renames and unlinks act on the names themselves and never follow a planted symlink.
        dir_fd = _open_dir(self.path.parent)
        try:
            name = self.path.name
            if self.keep == 0:
                _unlink(name, dir_fd)
            else:
                for n in range(self.keep - 1, 0, -1):
                    _rename(f"{name}.{n}", f"{name}.{n + 1}", dir_fd)
                _rename(name, f"{name}.1", dir_fd)
        finally:
            os.close(dir_fd)
        self._open()


def _open_dir(directory: Path) -> int:
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:
        if os.path.islink(directory):
            raise _Refused("the log directory is a symlink") from exc
        raise
    st = os.fstat(fd)
    if st.st_uid != os.getuid():
        os.close(fd)
        raise _Refused(f"the log directory belongs to uid {st.st_uid}")
    return fd


def _open_log(name: str, dir_fd: int) -> int:
    try:
        fd = os.open(name, _OPEN_FLAGS, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        try:
            mode = os.lstat(name, dir_fd=dir_fd).st_mode
        except OSError:
            raise exc from None
        if stat.S_ISLNK(mode):
            raise _Refused("the log file is a symlink") from exc
        if not stat.S_ISREG(mode):  # e.g. a FIFO with no reader (ENXIO)
            raise _Refused("the log file is not a regular file") from exc
        raise
    st = os.fstat(fd)
    reason = _unfit(st)
    if reason is not None:
        os.close(fd)
        raise _Refused(reason)
    os.set_blocking(fd, True)
    return fd


def _unfit(st: os.stat_result) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return "the log file is not a regular file"
    if st.st_uid != os.getuid():
        return f"the log file belongs to uid {st.st_uid}"
    if st.st_nlink != 1:
        return "the log file has other hard links"
    return None


def _rename(old: str, new: str, dir_fd: int) -> None:
    try:
        os.replace(old, new, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def log_path(store_path: Path, agent: str) -> Path:
    """``<store dir>/logs/<agent>.log``, the agent name made safe for a file name."""
    return store_path.parent / "logs" / f"{re.sub(r'[^A-Za-z0-9._-]', '_', agent)}.log"
