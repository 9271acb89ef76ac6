"""Mail search: SQLite FTS5 over the newest messages, built at query time in a TEMP table.

Why not an FTS table kept by triggers on ``messages``: that table is Overstory's and other
writers (``ov mail``, the hooks' hot path) share it; triggers would add an index write to every
send and a schema change to a file we share. Instead the dashboard's read-only connection keeps
a TEMP FTS5 index of the newest ``WINDOW`` messages, rebuilt only when mail changed since the
last search (about 45 ms for 5,000 messages here). Older mail is not searched; the page says so.
"""

from __future__ import annotations

import sqlite3
from typing import Any

WINDOW = 5000
RESULTS = 50


def fts_query(text: str) -> str | None:
    """The user's words as quoted FTS5 phrases (all must match); None when there is no word."""
    words = [w for w in text.split() if w.strip('"')][:12]
    if not words:
        return None
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def snippet_parts(snippet: str) -> list[tuple[str, bool]]:
    """``snippet()`` text with \\x01…\\x02 around hits → (text, is_hit) pieces, escaped apart."""
    parts: list[tuple[str, bool]] = []
    for i, chunk in enumerate(snippet.split("\x01")):
        hit, _, rest = chunk.partition("\x02") if i else ("", "", chunk)
        if hit:
            parts.append((hit, True))
        if rest:
            parts.append((rest, False))
    return parts


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
        conn.execute(self._q["search_index_fill"], (self.window,))
        self._built = (int(mark[0]), int(mark[1]))

    def search(self, conn: sqlite3.Connection, text: str) -> list[dict[str, Any]]:
        query = fts_query(text)
        if query is None:
            return []
        self._refresh(conn)
        out = []
        for row in conn.execute(self._q["search"], (query, RESULTS)):
            mid, sender, to, subject, created, thread, snippet = tuple(row)
            out.append({"id": mid, "from_agent": sender, "to_agent": to, "subject": subject,
                        "created_at": created, "thread": thread,
                        "snippet": snippet_parts(snippet or "")})  # fmt: skip
        return out
