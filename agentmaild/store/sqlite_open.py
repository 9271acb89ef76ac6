"""Opening a store file: the path checks, read-write with migration, read-only without a write.

Read-only opens serve the commands that only look (``status``, ``inbox``, ``list`` …): they never
create a store, and they work on a store the user may read but not write (a file of mode 0444, a
directory they cannot write, another user's project).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from agentmaild.errors import StoreError
from agentmaild.store.migrate import SCHEMA_VERSION

# What SQLite says when a read-only connection cannot set up WAL's shared memory because the
# directory is not writable (no -shm file to map) or the file can only be opened read-only.
_CANNOT_SHARE = frozenset(
    {"SQLITE_READONLY_DIRECTORY", "SQLITE_READONLY_CANTINIT", "SQLITE_CANTOPEN"}
)


def check_path(path: Path, *, create: bool) -> None:
    """A clear error for a path that cannot be a store: a directory, or a missing file."""
    if path.is_dir():
        raise StoreError(
            f"{path}: is a directory, not a store file "
            f"(point --db or AGENTMAIL_DB at a file, e.g. {path / 'mail.db'})"
        )
    if not create and not path.exists():
        raise StoreError(
            f"no store at {path}: this command never creates one; check --db / AGENTMAIL_DB, "
            "or create the store with `agentmaild agents add` or `agentmaild send`"
        )


def _uri(path: Path, *, immutable: bool) -> str:
    extra = "&immutable=1" if immutable else ""
    return f"file:{quote(str(path.absolute()))}?mode=ro{extra}"


def _connect_ro(path: Path, *, immutable: bool) -> tuple[sqlite3.Connection, int]:
    conn = sqlite3.connect(
        _uri(path, immutable=immutable),
        uri=True,
        isolation_level=None,
        timeout=5.0,
        check_same_thread=False,
    )
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        # The first read: it is where WAL's shared memory is needed (and may be refused).
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn, version


def _wal_is_empty(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    return not wal.exists() or wal.stat().st_size == 0


def connect_readonly(path: Path, upgrade: Callable[[], None]) -> sqlite3.Connection:
    """A read-only connection; ``upgrade`` runs once (read-write) when the schema is old."""
    try:
        conn, version = _connect_ro(path, immutable=False)
    except sqlite3.OperationalError as exc:
        # Nobody has the store open (no WAL content) and we may not create the -shm file: the
        # file alone is the whole store, so read it as unchanging. A writer that starts during
        # this one short command is not seen, which is what a snapshot read means anyway.
        if getattr(exc, "sqlite_errorname", "") not in _CANNOT_SHARE or not _wal_is_empty(path):
            raise
        conn, version = _connect_ro(path, immutable=True)
    if version >= SCHEMA_VERSION:
        return conn
    conn.close()
    _upgrade_or_explain(path, version, upgrade)
    return connect_readonly(path, upgrade)


def _upgrade_or_explain(path: Path, version: int, upgrade: Callable[[], None]) -> None:
    try:
        upgrade()
    except StoreError as exc:
        raise StoreError(
            f"store {path} has schema version {version} and needs upgrading to "
            f"{SCHEMA_VERSION}, which this read-only command cannot do; run `agentmaild serve` "
            "or any write command once as the store's owner"
        ) from exc
