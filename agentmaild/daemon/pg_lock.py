"""One daemon per (PostgreSQL store, host): a session advisory lock held on a connection of its own.

The lock lives as long as that connection: a daemon that dies (even SIGKILL) lets it go when the
server notices the connection closed. The connection's ``application_name`` carries the holder's
pid and host, so a second daemon — on any machine — names who holds it.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from agentmaild.errors import ControlError, StoreError
from agentmaild.store.postgres_tx import redacted

# The advisory lock "agentmaild daemon" (classid/objid form: 2 x int4); objid names the host.
_CLASS = 0x616D_6461


def lock_key(host: str) -> tuple[int, int]:
    """The (classid, objid) of ``host``'s daemon lock: the host's CRC-32 as a signed int4."""
    return _CLASS, zlib.crc32(host.encode()) - 2**31
_HOLDER = (
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = %s AND l.granted "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def holder_name(host: str) -> str:
    return f"agentmaild serve pid={os.getpid()} host={host}"


@contextmanager
def hold_pg_lock(dsn: str, host: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Hold ``host``'s daemon lock on the store; ``ControlError`` naming the holder if another
    daemon of that host has it (daemons of other hosts hold locks of their own)."""
    key = lock_key(host)
    try:
        conn = psycopg.connect(dsn, autocommit=True, application_name=holder_name(host))
    except psycopg.Error as exc:
        raise StoreError(f"cannot open store {redacted(dsn)}: {exc}") from exc
    try:
        row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()
        if not row or not row[0]:
            held = conn.execute(_HOLDER, key).fetchone()
            who = str(held[0]).removeprefix("agentmaild serve ") if held else "unknown"
            raise ControlError(
                f"agentmaild is already running for {redacted(dsn)} on host {host} ({who})"
            )
        yield conn
    finally:
        conn.close()
