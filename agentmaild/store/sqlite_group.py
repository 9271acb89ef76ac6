"""Group commit on SQLite: store calls queued together share one ``BEGIN IMMEDIATE … COMMIT``.

Under load the daemon's loops queue their claims, acks, releases and looks while the store's
thread is busy (``store.hops``). One transaction per call means one write-lock round and one WAL
commit each, while the senders fight for the same lock; here the calls of one hop run in one
transaction, each in a savepoint of its own:

- a call that raises an error of its own (``NotFound``, a refused release) is rolled back to its
  savepoint and gets its error; the others go on;
- an SQLite error anywhere (a full disk, an I/O error, the lock not to be had), or a failed
  COMMIT, rolls the whole group back, and then every call runs again *on its own*, exactly as it
  would have without grouping: each gets the result or the error it would have got alone;
- nothing is handed back before the COMMIT: an ack reaches its loop only once it is durable, and
  a crash before the COMMIT leaves every claim of the group as it was (redelivered later under
  the same delivery id, as after any crash between a turn and its ack).

What a call must do only once its write is committed (tell Overstory's banners, remember that a
claim left nothing behind) goes through ``after_commit``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from agentmaild.errors import StoreError

if TYPE_CHECKING:
    from agentmaild.store.hops import Runnable

T = TypeVar("T")


class Group:
    """The state of one group transaction: savepoints taken, callbacks due after COMMIT."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._savepoints = 0
        self.after: list[Callable[[], object]] = []
        self.broken = False  # an SQLite error: the group is rolled back and run call by call

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """One call's write inside the group's transaction, under a savepoint of its own."""
        if self.broken:
            raise StoreError("store write failed: its group transaction was rolled back")
        conn = self._conn
        name = f"am_g{self._savepoints}"
        self._savepoints += 1
        mark = len(self.after)
        try:
            conn.execute(f"SAVEPOINT {name}")
            result = fn(conn)
            conn.execute(f"RELEASE {name}")
        except sqlite3.Error as exc:
            self.broken = True
            raise StoreError(f"store write failed: {exc}") from exc
        except BaseException:
            del self.after[mark:]
            self._undo(name)
            raise
        return result

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self.broken:
            raise StoreError("store read failed: its group transaction was rolled back")
        try:
            return fn(self._conn)
        except sqlite3.Error as exc:
            self.broken = True
            raise StoreError(f"store read failed: {exc}") from exc

    def _undo(self, name: str) -> None:
        try:
            self._conn.execute(f"ROLLBACK TO {name}")
            self._conn.execute(f"RELEASE {name}")
        except sqlite3.Error:
            self.broken = True


def run_group(
    conn: sqlite3.Connection,
    calls: Sequence[Runnable],
    *,
    begin: Callable[[sqlite3.Connection], None],
    enter: Callable[[Group | None], None],
) -> bool:
    """Run ``calls`` in one transaction (``begin`` opens it; ``enter`` makes the store's writes
    and reads join the group, then leave it); True if they committed together. When False, the
    caller runs each call again on its own."""
    try:
        begin(conn)
    except sqlite3.Error:
        return False
    group = Group(conn)
    enter(group)
    try:
        for call in calls:
            call.run()
            if group.broken:
                break
    finally:
        enter(None)
    if not group.broken:
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            group.broken = True
    if group.broken:
        _rollback(conn)
        return False
    for callback in group.after:
        callback()
    return True


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the connection rolled back by itself (a full disk can do that)
