"""``store check`` on a PostgreSQL store: the schema agentmaild needs and its cross-table facts.

PostgreSQL keeps its own pages consistent (WAL, checksums when enabled), so there is no
``quick_check`` to run; what can drift is ours. In one read-only transaction, never migrating:

- the schema version (``am_schema_version``): none is an error (no store there); older than this
  agentmaild's is a warning (the next write command or ``serve`` migrates it), newer is a warning;
- every table of the version, the registry triggers (their NOTIFY wakes the daemons), the
  ending triggers (version 9: a send's recipient check relies on them) and the functions
  (``am_send_one`` from version 6, ``am_claim`` and ``am_ack`` from 7), and at the current
  version every other function and trigger ``sql/functions.sql`` defines: a missing one is a
  problem;
- invalid indexes (an interrupted build, which queries silently skip): a warning;
- the SQLite store's cross-table checks (unread mail of a delivery that does not exist is a
  problem; nudges of deleted messages a warning);
- with ``--full``, ``bt_index_check`` of every B-tree index of our tables when the ``amcheck``
  extension is installed in the database (a warning says so when it is not: creating it is a
  write, which this command never does).
"""

from __future__ import annotations

import psycopg

from agentmaild.errors import StoreError
from agentmaild.store.check import STALE_NUDGES, STRANDED, CheckReport
from agentmaild.store.copy_tables import TABLES
from agentmaild.store.postgres_migrate import (
    PG_SCHEMA_VERSION,
    current_version,
    defined_in_functions,
)
from agentmaild.store.postgres_tx import Conn, connect, redacted

PG_RECOVERY_HINT = (
    "stop agentmaild, restore the database from a backup, or copy what is left into a fresh "
    "database with `agentmaild store copy` and point agentmaild at it"
)
_CORE_TABLES = ("messages", "am_agents", "am_deliveries", "am_nudges", "am_prompt_seen")
_HOSTS_VERSION = 4
# The server-side functions, by the version that made them and what fails without them.
_FUNCTIONS = (("am_send_one", 6, "sends fail"), ("am_claim", 7, "the daemon cannot claim"),
              ("am_ack", 7, "the daemon cannot ack"))
# The triggers on am_agents, by the version that made them and what a missing one is called.
_TRIGGERS = (
    (("am_registry_on_insert", "am_registry_on_delete", "am_registry_on_update"), 1,
     "registry trigger(s) missing (daemons miss registry changes)"),
    # An agent's ending or removal takes its inbox lock, which sends check under.
    (("am_agent_ending_on_update", "am_agent_ending_on_delete"), 9,
     "trigger(s) missing (a send can race an agent's ending)"),
)
_INVALID_INDEXES = (
    "SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_class t ON t.oid = i.indrelid "
    "WHERE t.relnamespace = to_regnamespace(current_schema()) AND NOT i.indisvalid "
    "ORDER BY 1"
)
_BTREE_INDEXES = (
    "SELECT i.indexrelid::regclass::text AS name FROM pg_index i "
    "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_am a ON a.oid = c.relam "
    "WHERE t.relnamespace = to_regnamespace(current_schema()) AND a.amname = 'btree' "
    "AND i.indisvalid AND t.relname = ANY(%(tables)s) ORDER BY 1"
)


def check_pg_store(dsn: str, *, full: bool = False) -> CheckReport:
    """The checks above; ``StoreError`` when the database cannot be reached or holds no store."""
    where = redacted(dsn)
    try:
        conn = connect(dsn)
    except psycopg.Error as exc:
        raise StoreError(f"cannot open store {where}: {_first(exc, dsn)}") from exc
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            problems, warnings = _checks(conn, where, full)
    except psycopg.Error as exc:
        problems, warnings = [f"check failed: {_first(exc)}"], []
    finally:
        conn.close()
    return CheckReport(where, full, problems, warnings, engine="postgresql")


def _checks(conn: Conn, where: str, full: bool) -> tuple[list[str], list[str]]:
    version = current_version(conn)
    if version == 0:
        raise StoreError(f"no agentmaild store in {where}")
    warnings: list[str] = []
    if version < PG_SCHEMA_VERSION:
        warnings.append(f"schema version {version} is older than this agentmaild's "
                        f"({PG_SCHEMA_VERSION}): the next write command or `serve` migrates it")
    elif version > PG_SCHEMA_VERSION:
        warnings.append(f"schema version {version} is newer than this agentmaild's "
                        f"({PG_SCHEMA_VERSION}); upgrade agentmaild")
    problems = _missing(conn, version)
    if problems:
        return problems, warnings
    invalid = [r["name"] for r in conn.execute(_INVALID_INDEXES)]
    if invalid:
        warnings.append(f"invalid index(es), skipped by every query: {', '.join(invalid)}; "
                        "REINDEX them")
    stranded = _count(conn, STRANDED)
    if stranded:
        problems.append(f"{stranded} unread message(s) belong to a delivery that does not exist; "
                        "they would never be delivered")
    stale = _count(conn, STALE_NUDGES)
    if stale:
        warnings.append(f"{stale} nudge(s) name a message that no longer exists (harmless)")
    if full:
        more, note = _amcheck(conn)
        problems += more
        warnings += note
    return problems, warnings


def _missing(conn: Conn, version: int) -> list[str]:
    tables = list(TABLES) if version >= PG_SCHEMA_VERSION else list(_CORE_TABLES)
    if version >= _HOSTS_VERSION:
        tables.append("am_hosts")
    found = conn.execute(
        "SELECT t FROM unnest(%(t)s::text[]) AS t WHERE to_regclass(t) IS NULL", {"t": tables}
    ).fetchall()
    problems = [f"schema version {version} but table(s) missing: "
                f"{', '.join(r['t'] for r in found)}"] if found else []  # fmt: skip
    triggers = {r["tgname"] for r in conn.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass('am_agents')")}  # fmt: skip
    for names, since, missing in _TRIGGERS:
        lost = [t for t in names if version >= since and t not in triggers]
        if lost:
            problems.append(f"{missing}: {', '.join(lost)}")
    for name, since, fails in _FUNCTIONS:
        if version >= since and not _has_function(conn, name):
            problems.append(f"function {name} is missing: {fails}")
    if version >= PG_SCHEMA_VERSION:
        problems += _unlisted_missing(conn, triggers)
    return problems


def _has_function(conn: Conn, name: str) -> bool:
    return _count(conn, "SELECT count(*) FROM pg_proc WHERE proname = %s", (name,)) > 0


def _unlisted_missing(conn: Conn, triggers: set[str]) -> list[str]:
    """What functions.sql makes beyond the lists above (the triggers' own functions, any new
    one): a store at the current version has every one of them."""
    functions, made = defined_in_functions()
    listed = {name for name, _, _ in _FUNCTIONS} | {t for names, _, _ in _TRIGGERS for t in names}
    lost = [f for f in functions if f not in listed and not _has_function(conn, f)]
    lost += [t for t in made if t not in listed and t not in triggers]
    return [f"{name} is missing (sql/functions.sql makes it)" for name in lost]


def _amcheck(conn: Conn) -> tuple[list[str], list[str]]:
    if _count(conn, "SELECT count(*) FROM pg_extension WHERE extname = 'amcheck'") == 0:
        return [], ["--full: the amcheck extension is not installed in this database, so the "
                    "indexes' structure was not checked (CREATE EXTENSION amcheck enables it)"]
    problems = []
    for row in conn.execute(_BTREE_INDEXES, {"tables": [*TABLES, "am_hosts"]}).fetchall():
        try:
            with conn.transaction():  # a savepoint: one corrupt index does not end the check
                conn.execute("SELECT bt_index_check(%s::regclass)", (row["name"],))
        except (psycopg.errors.DataCorrupted, psycopg.errors.IndexCorrupted) as exc:
            problems.append(f"index {row['name']}: {_first(exc)}")
    return problems, []


def _count(conn: Conn, sql: str, params: tuple[object, ...] | None = None) -> int:
    row = conn.execute(sql, params).fetchone()
    return int(row["count"]) if row else 0


def _first(exc: BaseException, dsn: str = "") -> str:
    """The first line of a driver error, without ``dsn``'s password (libpq may quote it)."""
    from agentmaild.store.redaction import scrub

    return scrub((str(exc).strip().splitlines() or [type(exc).__name__])[0], dsn)
