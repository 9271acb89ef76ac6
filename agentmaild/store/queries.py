"""Loads the store's named SQL queries (one ``-- name:`` header per query), per dialect.

``sql/queries.sql`` holds every query once, with ``:name`` parameters: SQLite runs that text as
it is (``Q``, read on the cold paths, so nothing here is done for SQLite but the parse).
PostgreSQL's dict (``queries_for("postgres")``) is the same file overlaid with
``sql/dialect/postgres.sql`` (the queries whose text truly differs, and PostgreSQL's own), its
placeholders turned into psycopg's at load (``pyformat``) and SQLite's ``INDEXED BY`` planner
hints dropped.

A smaller file of one part's queries (``ports.sql``, ``reader.sql``) keeps a PostgreSQL spelling
right under the query it replaces, as ``-- name: x@postgres``; ``named(file, dialect)`` picks it.
"""

from __future__ import annotations

import os

_SQL_DIR = os.path.join(os.path.dirname(__file__), "sql")
SQLITE = "sqlite"
POSTGRES = "postgres"
DIALECTS = (SQLITE, POSTGRES)


def parse_named(text: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("-- name:"):
            if name:
                queries[name] = "\n".join(lines).strip()
            name, lines = line.split(":", 1)[1].strip(), []
        elif name is not None and not line.lstrip().startswith("--"):
            lines.append(line)
    if name:
        queries[name] = "\n".join(lines).strip()
    return queries


def read_sql(name: str) -> str:
    with open(os.path.join(_SQL_DIR, name), encoding="utf-8") as f:
        return f.read()


Q = parse_named(read_sql("queries.sql"))
_loaded: dict[str, dict[str, str]] = {"sqlite": Q}


def queries_for(dialect: str) -> dict[str, str]:
    """The named queries as ``dialect`` runs them (loaded once per process)."""
    if dialect not in _loaded:
        if dialect not in DIALECTS:
            raise ValueError(f"no SQL dialect {dialect!r}")
        merged = Q | parse_named(read_sql(f"dialect/{dialect}.sql"))
        _loaded[dialect] = {name: _constants(_for_psycopg(sql)) for name, sql in merged.items()}
    return _loaded[dialect]


def named(file: str, dialect: str) -> dict[str, str]:
    """The queries of ``sql/<file>`` as ``dialect`` runs them (``x@<dialect>`` replaces ``x``)."""
    every = parse_named(read_sql(file))
    suffix = "@" + dialect
    chosen = {k: v for k, v in every.items() if "@" not in k}
    chosen.update({k[: -len(suffix)]: v for k, v in every.items() if k.endswith(suffix)})
    if dialect == SQLITE:
        return chosen
    return {k: _for_psycopg(v) for k, v in chosen.items()}


def _constants(sql: str) -> str:
    """``sql`` with the constants it names written in: ``{refused}``, the states a recipient is
    refused in, as an array literal (psycopg would dump a list parameter on every call)."""
    if "{refused}" not in sql:
        return sql
    from agentmaild.models import REFUSED_STATES

    return sql.replace("{refused}", "'{" + ",".join(sorted(REFUSED_STATES)) + "}'")


def _for_psycopg(sql: str) -> str:
    import re

    return pyformat(re.sub(r"\s+INDEXED BY \w+", "", sql))


def pyformat(sql: str) -> str:
    """``sql`` with its ``:name`` parameters as psycopg's ``%(name)s`` and every ``%`` doubled
    (psycopg reads ``%`` everywhere, string literals included); ``::`` casts and string
    literals' text are left alone."""
    import re

    def swap(m: re.Match[str]) -> str:
        token = m.group(0)
        if m.group(1):
            return f"%({m.group(1)})s"
        return token.replace("%", "%%") if token != "::" else token

    return re.sub(r"'(?:[^']|'')*'|::|:([A-Za-z_]\w*)|%", swap, sql)


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
