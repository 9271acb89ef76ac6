"""The store's daemon lock: one ``serve`` per store, the holder's pid inside the lock file.

The lock file is named from the store's *resolved* path, so a symlink to the store reaches the
same lock. It is opened without following a symlink and must be a regular file of ours: a link
planted at the lock's name never makes the daemon write through it.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentmaild.errors import ControlError
from agentmaild.store.files import make_store_dir


def lock_path_for(db: Path) -> Path:
    """``<resolved db>.lock``; ``db`` must already be resolved."""
    return db.with_name(db.name + ".lock")


@contextmanager
def hold_lock(db: Path) -> Iterator[None]:
    """``<db>.lock``, flock'ed for the daemon's lifetime, with our pid inside.

    ``db`` is the resolved store path and its directory exists.
    """
    make_store_dir(db.parent)
    path = lock_path_for(db)
    fd = _open_lock(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise ControlError(f"agentmaild is already running for {db} (pid {pid})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _open_lock(path: Path) -> int:
    """The lock file's fd (non-inheritable: children never hold it); never through a symlink."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise ControlError(
                f"lock file {path} is a symbolic link; refusing to follow it (remove it)"
            ) from exc
        raise ControlError(f"cannot open lock file {path}: {exc.strerror or exc}") from exc
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise ControlError(
            f"lock file {path} is not a regular file owned by uid {os.getuid()}; "
            "refusing to use it (remove it)"
        )
    return fd
