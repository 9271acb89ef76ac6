"""The dashboard's reader on a PostgreSQL store: its own read-only connection, not the store's.

The connection is opened with ``default_transaction_read_only`` (a page cannot write) in
autocommit, so each query reads the latest commit and holds no snapshot between ticks. The
change mark is the next transaction id to be assigned (``store.marks``).
Search is PostgreSQL full-text search over all mail (``websearch_to_tsquery``: words, "phrases",
-not, or), on the GIN index of schema step 5.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from agentmaild.errors import StoreError
from agentmaild.store.marks import POSTGRES_MARK, postgres_mark
from agentmaild.store.queries import POSTGRES, named
from agentmaild.store.reader import Reader, search_terms, snippet_parts

PQ = named("reader.sql", POSTGRES)
RESULTS = 50


class PostgresReader(Reader):
    search_window = None  # all mail is searched
    errors = (psycopg.Error, StoreError)

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn = dsn
        self._conn: psycopg.Connection[dict[str, Any]] | None = None

    def conn(self) -> psycopg.Connection[dict[str, Any]]:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self.dsn, autocommit=True, row_factory=dict_row,
                application_name="agentmaild-dashboard",
                options="-c default_transaction_read_only=on -c statement_timeout=5000",
            )  # fmt: skip
        return self._conn

    def mark(self) -> object:
        return postgres_mark(self.conn().execute(POSTGRES_MARK).fetchone())

    def rows(self, name: str, **params: Any) -> list[dict[str, Any]]:
        return self.conn().execute(PQ[name], params).fetchall()

    def search(self, text: str) -> list[dict[str, Any]]:
        terms = search_terms(text)
        if not terms:
            return []
        words = " ".join(
            ("or " if t.either else "")
            + ("-" if t.exclude else "")
            + '"'
            + t.text.replace('"', " ")
            + '"'
            for t in terms
        )
        found = self.rows("search", query=words, limit=RESULTS)
        return [{**r, "snippet": snippet_parts(r["snippet"] or "")} for r in found]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
