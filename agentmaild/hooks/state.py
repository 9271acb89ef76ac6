"""The hook's small files beside the store: marker files (the mid-turn debounce stamp, the
stop-block counter) and the ``hooks.log`` line writer.

Loaded by ``agentmaild hook`` only for the events and failures that need it, so it is stdlib only.
"""

from __future__ import annotations

import json
import os
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

LOG_MAX_BYTES = 1 << 20
_LOG_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def marker_path(db_path: str, agent: str, kind: str) -> str:
    """``<store dir>/hooks/<agent>.<kind>``."""
    store_dir = os.path.dirname(os.path.abspath(db_path))
    return os.path.join(store_dir, "hooks", f"{agent}.{kind}")


def touched_within(path: str, seconds: float) -> bool:
    """True when ``path`` was touched less than ``seconds`` ago: a stat, no write to the store."""
    try:
        return time.time() - os.stat(path).st_mtime < seconds
    except FileNotFoundError:
        return False


_MARKER_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_marker(path: str, extra: int = 0) -> int:
    """Open a marker file of ours for writing, never through a planted link or a foreign file.

    ``OSError`` on a symlink (ELOOP), a FIFO or device, a file of another uid, or a hard link:
    the caller's write is then lost, which costs a debounce or a counter, never someone's file.
    """
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, _MARKER_FLAGS | extra, 0o600)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_nlink != 1:
        os.close(fd)
        raise OSError(f"{path}: not a private regular file; left alone")
    return fd


def touch(path: str) -> Callable[[], None]:
    def touch() -> None:
        fd = _open_marker(path)
        try:
            os.utime(fd)
        finally:
            os.close(fd)

    return touch


def read_int(path: str) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return 0
        return int(os.read(fd, 32).decode("ascii").strip() or 0)
    except (OSError, ValueError):
        return 0
    finally:
        os.close(fd)


def write_int(path: str, value: int) -> Callable[[], None]:
    def write() -> None:
        fd = _open_marker(path)
        try:
            os.ftruncate(fd, 0)  # after the checks: O_TRUNC would cut a foreign file first
            os.write(fd, str(value).encode("ascii"))
        finally:
            os.close(fd)

    return write


def log_line(
    db: str | None, what: str, *, event: str, agent: str, exc: BaseException | None
) -> None:
    """Append one key=value line to the hook log; never raises (there is nowhere left to report)."""
    from agentmaild.ids import iso_now

    where = ""
    if exc is not None and exc.__traceback__ is not None:
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        where = f" where={os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
    error = f" error={json.dumps(f'{type(exc).__name__}: {exc}')}" if exc is not None else ""
    line = f"{iso_now()} {what} event={event!r} agent={agent!r} pid={os.getpid()}{error}{where}\n"
    refused = ""
    for directory in _log_dirs(db):
        try:
            fd = _open_log(directory)
        except OSError:
            continue
        if fd is None:  # planted symlink, FIFO, foreign or hard-linked file: never written through
            name = json.dumps(os.path.join(directory, "hooks.log"))
            refused += f"{iso_now()} hook.log_refused path={name} pid={os.getpid()}\n"
            continue
        try:
            os.write(fd, (refused + line).encode("utf-8", "replace"))
            return
        except OSError:
            continue
        finally:
            os.close(fd)


def _open_log(directory: str) -> int | None:
    """An append fd on ``<directory>/hooks.log`` (rotated past ``LOG_MAX_BYTES``); None: refused.

    The directory and the file are opened without following symlinks, and the file is kept only
    when it is a regular file of ours with one link.
    """
    os.makedirs(directory, mode=0o700, exist_ok=True)
    try:
        dir_fd = os.open(directory, _DIR_FLAGS)
    except OSError:
        if os.path.islink(directory):
            return None
        raise
    try:
        if os.fstat(dir_fd).st_uid != os.getuid():
            return None
        _rotate(dir_fd)
        try:
            fd = os.open("hooks.log", _LOG_FLAGS, 0o600, dir_fd=dir_fd)
        except OSError:
            if _exists("hooks.log", dir_fd):
                return None  # a symlink (ELOOP) or a FIFO with no reader (ENXIO)
            raise
    finally:
        os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_nlink != 1:
        os.close(fd)
        return None
    return fd


def _rotate(dir_fd: int) -> None:
    try:
        st = os.lstat("hooks.log", dir_fd=dir_fd)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode) and st.st_size > LOG_MAX_BYTES:
        os.replace("hooks.log", "hooks.log.1", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return False
    return True


def _log_dirs(db: str | None) -> list[str]:
    dirs = [os.path.join(os.path.dirname(os.path.abspath(db)), "logs")] if db else []
    home = os.path.expanduser("~")
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return [*dirs, os.path.join(state, "agentmaild")]
