"""The store's files on disk: who may read them, which inode a path names, what a daemon refuses.

A store is identified by its resolved path (the lock file is named from it, so a symlink reaches
the same lock) and by the (st_dev, st_ino) of the file the daemon opened (watched while it runs,
so a file replaced or deleted under it is noticed). SQLite keeps the WAL and the shared-memory
index beside the database *by name*, so two names for one file (a hard link in another directory)
would pair one database with two WALs: such a file is refused outright.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

from agentmaild.errors import StoreError

SIDE_FILES = ("-wal", "-shm")
PRIVATE_MODE = 0o600


class FileIdentity(NamedTuple):
    dev: int
    ino: int


def resolved(db: Path) -> Path:
    """The store's one true name: symlinks resolved, ``~`` expanded, absolute."""
    return Path(os.path.realpath(db.expanduser()))


def identity(path: Path) -> FileIdentity | None:
    """The (st_dev, st_ino) ``path`` names now, following symlinks; None when it names nothing."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return FileIdentity(st.st_dev, st.st_ino)


def hard_link_error(path: Path | str, links: int) -> StoreError:
    return StoreError(
        f"store {path} has {links} hard links; SQLite keeps its WAL beside each name, so two "
        f"names for one file lose data. Keep one name (remove the other links) and use a "
        f"symlink instead"
    )


def refuse_hard_links(path: Path) -> None:
    """``StoreError`` when the store file has more than one hard link; nothing when it is absent
    (or not a regular file: opening it reports that)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot stat store {path}: {exc.strerror or exc}") from exc
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise hard_link_error(path, st.st_nlink)


def create_private(path: Path) -> None:
    """Create the store file 0600 when it does not exist yet.

    SQLite gives the ``-wal`` and ``-shm`` files the database file's mode, so creating the database
    file ourselves, private, makes all three private, whatever the umask (and touches no
    process-wide umask, which a daemon's threads and children would share). A symlink is
    resolved first, so a link to a store not created yet gets a private target too.
    """
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(os.path.realpath(path), flags, PRIVATE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def readable_by_others(db: Path) -> list[Path]:
    """The store's files (database, WAL, shared memory) that group or other users can read."""
    loose = []
    for path in (db, *(db.with_name(db.name + s) for s in SIDE_FILES)):
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if mode & 0o044:
            loose.append(path)
    return loose


def modes_warning(db: Path) -> str | None:
    """One line naming the store files other users can read and the fix, or None."""
    loose = readable_by_others(db)
    if not loose:
        return None
    names = " ".join(str(p) for p in loose)
    return f"store files are readable by other users: {names}; fix: chmod 600 {names}"


def check_private_dir(directory: Path) -> None:
    """Refuse a store directory other users can write to (unless sticky and ours).

    Whoever can write there can plant files beside the store (a WAL, a lock file, a socket) or
    swap the store itself.
    """
    try:
        st = directory.stat()
    except OSError as exc:
        raise StoreError(f"cannot stat store directory {directory}: {exc.strerror or exc}") from exc
    ours = st.st_uid == os.getuid()
    if not st.st_mode & 0o022 or (ours and st.st_mode & stat.S_ISVTX):
        return
    who = "group and other users" if st.st_mode & 0o022 == 0o022 else (
        "its group" if st.st_mode & 0o020 else "other users"
    )
    raise StoreError(
        f"store directory {directory} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o}); "
        f"they could replace the store or plant files beside it. Fix: chmod 700 {directory}"
    )


def make_store_dir(directory: Path) -> None:
    """Create the store directory (and missing parents) 0700, with a ``.gitignore`` of ``*`` so
    git never sees the mail, the lock, the socket or the logs. An existing one is left as it is."""
    try:
        directory.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        return
    except OSError as exc:
        raise StoreError(
            f"cannot create store directory {directory}: {exc.strerror or exc}"
        ) from exc
    (directory / ".gitignore").write_text("# agentmaild's store: mail, locks, logs\n*\n")
