"""The dashboard's reader on a SQLite store: a read-only WAL connection, ``PRAGMA data_version``
as the change mark, and mail search with FTS5 over the newest messages, built at query time.

Why search has no FTS table kept by triggers on ``messages``: that table is Overstory's and other
writers (``ov mail``, the hooks' hot path) share it; triggers would add an index write to every
send and a schema change to a file we share. Instead the reader's connection keeps a TEMP FTS5
index of the newest ``WINDOW`` messages, rebuilt only when mail changed since the last search
(about 45 ms for 5,000 messages here). Older mail is not searched; the page says so.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from agentmaild.errors import StoreError
from agentmaild.store.marks import sqlite_mark
from agentmaild.store.queries import SQLITE, named
from agentmaild.store.reader import Reader, search_terms, snippet_parts
from agentmaild.store.sqlite_open import connect_readonly

Q = named("reader.sql", SQLITE)
WINDOW = 5000
RESULTS = 50


class SqliteReader(Reader):
    search_window = WINDOW
    errors = (sqlite3.Error, StoreError)

    def __init__(self, db: Path) -> None:
        super().__init__()
        self.db = db
        self._conn: sqlite3.Connection | None = None
        self.search_index = SearchIndex(Q)

    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            # The daemon migrated the file before serving: nothing to upgrade here.
            conn = connect_readonly(self.db, lambda: None)
            conn.row_factory = sqlite3.Row
            self._conn = conn
        return self._conn

    def mark(self) -> object:
        return sqlite_mark(self.conn())

    def rows(self, name: str, **params: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn().execute(Q[name], params)]

    def search(self, text: str) -> list[dict[str, Any]]:
        return self.search_index.search(self.conn(), text)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def fts_query(text: str) -> str | None:
    """The search's terms (``reader.search_terms``) as an FTS5 query: each term a quoted phrase,
    ``or`` as OR, ``-`` as NOT; None when nothing could match."""
    terms = search_terms(text)
    if not terms:
        return None
    groups: list[list[str]] = []
    for t in terms:
        if t.exclude:
            continue
        phrase = '"' + t.text.replace('"', '""') + '"'
        if t.either and groups:
            groups[-1].append(phrase)
        else:
            groups.append([phrase])
    query = " AND ".join(g[0] if len(g) == 1 else "(" + " OR ".join(g) + ")" for g in groups)
    nots = ["NOT \"" + t.text.replace('"', '""') + '"' for t in terms if t.exclude]
    return " ".join([f"({query})", *nots]) if nots else query


class SearchIndex:
    """The TEMP index on one connection, and the (newest rowid, count) it was built from."""

    def __init__(self, queries: dict[str, str], window: int = WINDOW) -> None:
        self._q = queries
        self.window = window
        self._built: tuple[int, int] | None = None

    def _refresh(self, conn: sqlite3.Connection) -> None:
        mark = tuple(conn.execute(self._q["newest_rowid"]).fetchone())
        if mark == self._built:
            return
        conn.execute(self._q["search_index_create"])
        conn.execute(self._q["search_index_clear"])
        conn.execute(self._q["search_index_fill"], {"window": self.window})
        self._built = (int(mark[0]), int(mark[1]))

    def search(self, conn: sqlite3.Connection, text: str) -> list[dict[str, Any]]:
        query = fts_query(text)
        if query is None:
            return []
        self._refresh(conn)
        out = []
        for row in conn.execute(self._q["search"], {"query": query, "limit": RESULTS}):
            mid, sender, to, subject, created, thread, snippet = tuple(row)
            out.append({"id": mid, "from_agent": sender, "to_agent": to, "subject": subject,
                        "created_at": created, "thread": thread,
                        "snippet": snippet_parts(snippet or "")})  # fmt: skip
        return out
