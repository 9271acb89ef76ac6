"""The store's daemon lock: one ``serve`` per store, the holder's pid inside the lock file."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentmaild.errors import ControlError
from agentmaild.store.sqlite import make_store_dir


@contextmanager
def hold_lock(db: Path) -> Iterator[None]:
    """``<db>.lock``, flock'ed for the daemon's lifetime, with our pid inside."""
    path = db.with_name(db.name + ".lock")
    try:
        make_store_dir(db.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # non-inheritable: children never hold it
    except OSError as exc:
        raise ControlError(f"cannot open lock file {path}: {exc.strerror or exc}") from exc
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
