"""The daemon's look for mail read elsewhere, on a read-only connection of its own (SQLite).

``Looks`` is the offer (``MailStore.open_looks``); ``SqliteLooks`` is SQLite's.

Just before it injects a batch, a delivery loop asks which of its messages are still unread
(``delivery.elsewhere``). Asked of the store's own connection, the question waits its turn behind
the claims and acks queued for the store's thread, and under load it rides in their group
transaction: one more round trip of the store's thread per delivery. A WAL reader never waits for
the write lock, so here the look runs at once in the event loop's thread, on a connection nothing
else uses, and sees every commit made before it (each statement is its own read transaction).
``busy_timeout`` is 0: the event loop never sleeps in SQLite; a look that cannot run at once
(SQLite busy, the connection gone) answers None and the caller asks the store instead.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

_UNREAD_AMONG = "SELECT id FROM messages WHERE read = 0 AND id IN (SELECT value FROM json_each(?))"


class Looks(Protocol):
    """What ``MailStore.open_looks`` offers: ``unread_among`` answered at once, or None."""

    def unread_among(self, ids: Sequence[str]) -> set[str] | None: ...

    def close(self) -> None: ...


class SqliteLooks:
    """``unread_among`` on a read-only connection; ``None`` when it cannot answer at once."""

    def __init__(self, path: Path) -> None:
        uri = f"file:{quote(str(path.absolute()))}?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout = 0")

    def unread_among(self, ids: Sequence[str]) -> set[str] | None:
        try:
            rows = self._conn.execute(_UNREAD_AMONG, (json.dumps(list(ids)),)).fetchall()
        except sqlite3.Error:
            return None
        return {str(r[0]) for r in rows}

    def close(self) -> None:
        self._conn.close()
