"""The dashboard's reads on a PostgreSQL store: its own read-only connection, not the store's.

The connection is opened with ``default_transaction_read_only`` (a page cannot write) in
autocommit, so each query reads the latest commit and holds no snapshot between ticks. The
change mark is the next transaction id to be assigned (``pg_snapshot_xmax``): it moves whenever
anything writes — at worst more often than our tables change, never less. Search is PostgreSQL
full-text search over all mail (``websearch_to_tsquery``: words, "phrases", -not, or), on the
GIN index of schema step 5.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from agentmaild.store.marks import POSTGRES_MARK, postgres_mark
from agentmaild.store.queries import parse_named
from agentmaild.web.reader import Reader
from agentmaild.web.search import RESULTS, snippet_parts

PQ = parse_named((Path(__file__).parent / "pg_queries.sql").read_text(encoding="utf-8"))
MAX_WORDS = 12


class PgReader(Reader):
    search_window = None  # all mail is searched
    errors = (psycopg.Error,)

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

    def rows(self, name: str, *args: Any) -> list[dict[str, Any]]:
        return self.conn().execute(PQ[name], args).fetchall()

    def mark(self) -> object:
        return postgres_mark(self.conn().execute(POSTGRES_MARK).fetchone())

    def search(self, text: str) -> list[dict[str, Any]]:
        words = " ".join(text.split()[:MAX_WORDS])
        if not words.strip('"- '):
            return []
        found = self.rows("search", words, RESULTS)
        return [{**r, "snippet": snippet_parts(r["snippet"] or "")} for r in found]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
