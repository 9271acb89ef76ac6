"""Each named query written once: ``sql/queries.sql`` for both stores, ``sql/dialect/postgres.sql``
only where PostgreSQL's text truly differs; placeholders translated at load. Every query of
each dialect is accepted by its real database (EXPLAIN on SQLite, PREPARE on PostgreSQL)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import psycopg
import pytest

from agentmaild.store.queries import Q, parse_named, pyformat, queries_for, read_sql
from agentmaild.store.sqlite import SqliteMailStore


def test_placeholders_become_psycopgs_and_casts_literals_and_percent_survive() -> None:
    sql = "SELECT :a::text, 'x:y %', b LIKE 'peer:%' AND c = :c_2 WHERE d % 2 = :a"
    assert pyformat(sql) == (
        "SELECT %(a)s::text, 'x:y %%', b LIKE 'peer:%%' AND c = %(c_2)s WHERE d %% 2 = %(a)s"
    )
    assert pyformat("SELECT 'it''s :not' || :yes") == "SELECT 'it''s :not' || %(yes)s"


def test_postgres_gets_every_query_once_translated_without_sqlite_hints() -> None:
    pg = queries_for("postgres")
    dialect = parse_named(read_sql("dialect/postgres.sql"))
    assert set(pg) == set(Q) | set(dialect)
    assert queries_for("sqlite") is Q
    for name, sql in pg.items():
        assert "INDEXED BY" not in sql, name
        assert not re.search(r"(?<![:\w]):[A-Za-z_]", _without_literals(sql)), name
    assert "INDEXED BY" in Q["pending_agents"] and "%(agent)s" in pg["pull_candidates"]
    with pytest.raises(ValueError, match="no SQL dialect"):
        queries_for("oracle")


def test_the_dialect_file_holds_no_copy_of_a_shared_query() -> None:
    """An override must differ from the shared text by more than the SQLite hint."""
    pg = queries_for("postgres")
    for name in parse_named(read_sql("dialect/postgres.sql")):
        if name in Q:
            assert pg[name] != pyformat(re.sub(r"\s+INDEXED BY \w+", "", Q[name])), name


def _without_literals(sql: str) -> str:
    return re.sub(r"'(?:[^']|'')*'", "''", sql)


def _placeholders(sql: str) -> list[str]:
    return sorted(set(re.findall(r"(?<!:):([A-Za-z_]\w*)", _without_literals(sql))))


def test_every_query_compiles_on_sqlite(tmp_path: Path) -> None:
    store = SqliteMailStore(tmp_path / "mail.db")
    try:
        conn = store.connection
        for name, sql in Q.items():
            try:
                conn.execute("EXPLAIN " + sql, dict.fromkeys(_placeholders(sql)))
            except sqlite3.Error as exc:  # pragma: no cover - the assertion says which
                pytest.fail(f"{name}: {exc}")
    finally:
        store.close()


# PostgreSQL-only shapes PREPARE cannot type from NULLs alone: given their types here.
_PG_TYPES = {("mark_read", "ids"): "text[]"}


def test_every_postgres_query_prepares(pg_dsn: str) -> None:
    failed: list[str] = []
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name, sql in queries_for("postgres").items():
            text = sql.replace("{refused}", "'{}'")
            names = sorted(set(re.findall(r"%\((\w+)\)s", text)))
            for i, param in enumerate(names, 1):
                typed = _PG_TYPES.get((name, param))
                cast = f"${i}::{typed}" if typed else f"${i}"
                text = text.replace(f"%({param})s", cast)
            try:
                conn.execute(f"PREPARE q AS {text.replace('%%', '%')}".encode())
                conn.execute("DEALLOCATE q")
            except psycopg.Error as exc:
                failed.append(f"{name}: {str(exc).splitlines()[0]}")
    assert failed == []


def test_the_agent_update_sets_exactly_the_mutable_fields() -> None:
    """``agent_update`` is written out in queries.sql; the rule of what may change is
    ``AGENT_MUTABLE_FIELDS``: the two cannot drift apart."""
    from agentmaild.store.records import AGENT_MUTABLE_FIELDS

    sets = Q["agent_update"].split(" SET ", 1)[1].split("WHERE")[0]
    columns = {part.split("=")[0].strip() for part in sets.split(",")}
    assert columns == AGENT_MUTABLE_FIELDS | {"turn_state_at", "updated_at"}
