"""Loads named SQL queries (one ``-- name:`` header per query): SQLite's ``sql/queries.sql``."""

from __future__ import annotations

import os

_SQL_DIR = os.path.join(os.path.dirname(__file__), "sql")


def parse_named(text: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("-- name:"):
            if name:
                queries[name] = "\n".join(lines).strip()
            name, lines = line.split(":", 1)[1].strip(), []
        elif name is not None and not line.startswith("--"):
            lines.append(line)
    if name:
        queries[name] = "\n".join(lines).strip()
    return queries


def read_sql(name: str) -> str:
    with open(os.path.join(_SQL_DIR, name), encoding="utf-8") as f:
        return f.read()


Q = parse_named(read_sql("queries.sql"))


def schema_statements() -> list[str]:
    """The schema script split into statements (executescript would commit our transaction)."""
    import sqlite3

    statements: list[str] = []
    current = ""
    for line in read_sql("schema.sql").splitlines(keepends=True):
        current += line
        # A trigger body holds ";" too: a statement ends where SQLite says it is complete.
        if sqlite3.complete_statement(current):
            # Comment lines go: callers look statements up by how they begin.
            code = "".join(
                x for x in current.splitlines(keepends=True) if not x.lstrip().startswith("--")
            )
            if code.strip():
                statements.append(code.strip())
            current = ""
    return statements
