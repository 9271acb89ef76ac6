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


class PgHostLock:
    """``host``'s daemon lock on the store, held by the session of ``conn``.

    A database restart (or a killed backend) ends that session and with it the lock: ``alive()``
    notices, ``retake()`` reconnects and takes it again — ``ControlError`` naming the holder when
    another daemon of this host took it in the meantime."""

    def __init__(self, dsn: str, host: str) -> None:
        self.dsn, self.host = dsn, host
        self.conn: psycopg.Connection[tuple[object, ...]] | None = None

    def take(self) -> None:
        key = lock_key(self.host)
        conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10,
                               application_name=holder_name(self.host))
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()
            if not row or not row[0]:
                held = conn.execute(_HOLDER, key).fetchone()
                who = str(held[0]).removeprefix("agentmaild serve ") if held else "unknown"
                raise ControlError(
                    f"agentmaild is already running for {redacted(self.dsn)} on host "
                    f"{self.host} ({who})"
                )
        except BaseException:
            conn.close()
            raise
        self.close()
        self.conn = conn

    def alive(self) -> bool:
        """One round trip on the lock's session: False once the server ended it."""
        if self.conn is None or self.conn.closed or self.conn.broken:
            return False
        try:
            self.conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def retake(self) -> None:
        self.close()
        self.take()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@contextmanager
def hold_pg_lock(dsn: str, host: str) -> Iterator[PgHostLock]:
    """Hold ``host``'s daemon lock on the store; ``ControlError`` naming the holder if another
    daemon of that host has it (daemons of other hosts hold locks of their own)."""
    held = PgHostLock(dsn, host)
    try:
        held.take()
    except psycopg.Error as exc:
        from agentmaild.store.redaction import scrub  # libpq may quote the DSN

        raise StoreError(f"cannot open store {redacted(dsn)}: {scrub(str(exc), dsn)}") from exc
    try:
        yield held
    finally:
        held.close()
