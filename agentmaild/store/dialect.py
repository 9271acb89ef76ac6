"""Named queries written once for both backends: ``:name`` placeholders, dialect overrides beside.

A file of ``-- name: x`` queries holds each query once, with SQLite's (and the SQL standard's)
``:name`` placeholders. Where PostgreSQL truly needs another spelling, the same file holds
``-- name: x@postgres`` right under it. ``named(file, dialect)`` picks the dialect's version of
each query and, for PostgreSQL, turns ``:name`` into psycopg's ``%(name)s`` at load (``::`` casts
are left alone). Stdlib only: the hooks' SQLite cold path loads its queries through here.
"""

from __future__ import annotations

import os

SQLITE = "sqlite"
POSTGRES = "postgres"
_SQL_DIR = os.path.join(os.path.dirname(__file__), "sql")


def parse(text: str) -> dict[str, str]:
    """Every ``-- name:`` block of ``text`` (comment lines dropped), overrides included."""
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


def named(file: str, dialect: str) -> dict[str, str]:
    """The queries of ``sql/<file>`` as ``dialect`` runs them."""
    with open(os.path.join(_SQL_DIR, file), encoding="utf-8") as f:
        every = parse(f.read())
    suffix = "@" + dialect
    chosen = {k: v for k, v in every.items() if "@" not in k}
    chosen.update({k[: -len(suffix)]: v for k, v in every.items() if k.endswith(suffix)})
    if dialect == POSTGRES:
        return {k: to_pyformat(v) for k, v in chosen.items()}
    return chosen


def to_pyformat(sql: str) -> str:
    """``:name`` → ``%(name)s`` (and a literal ``%`` doubled); a ``::type`` cast stays."""
    import re

    sql = sql.replace("%", "%%")
    return re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", r"%(\1)s", sql)
