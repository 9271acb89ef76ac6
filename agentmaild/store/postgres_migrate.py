"""PostgreSQL schema versions: keyed by ``am_schema_version``, applied in one transaction under an
advisory lock, so two hosts (or two processes) starting at once migrate once and both proceed.

The steps (``sql/migrations/pg_N.sql``) change the schema only. The server-side functions and
their triggers are written once, in their current form, in ``sql/functions.sql``, which every
migration run applies after its steps (``CREATE OR REPLACE``: idempotent), so a database
upgraded step by step ends with the same functions as a new one. PostgreSQL's DDL is
transactional: a failed upgrade leaves the database exactly as it was.
"""

from __future__ import annotations

from agentmaild.store.postgres_tx import Conn
from agentmaild.store.queries import read_sql

# 1: the tables of the SQLite schema 3 (messages with agentmaild's columns, am_*); 2: those of
# the SQLite schema 4 (am_tokens, the team rules' tables, am_agents.shutdown_requested_at,
# am_deliveries.queue); 3: those of the SQLite schema 5 (the trust domains: am_peers, am_nonces,
# am_peer_messages, am_relayed); 4: agents per host (am_agents.host, also SQLite schema 5) and
# the host daemons' heartbeats (am_hosts); 5: the dashboard's indexes (full-text search over
# subject and body, the newest mail by (created_at, id)); 6: the common send as one server-side
# function call (am_send_one); 7: the daemon's claim and ack as one function call each (am_claim,
# am_ack); 8: the same three functions with less server work per call (am_claim's common case
# without the redelivery part, am_ack's two message updates as one, am_send_one's recent-sends
# row without a speculative insertion); 9: a send's recipient check under an advisory lock that
# an agent's ending or removal also takes (a trigger), instead of a share lock on the agent's row;
# the loop guard's recent sends unlogged; 10: am_settings (the store's own settings: the team
# rules its daemons write; SQLite schema 8); 11: am_queue_members.served_at (the queue's turn) and
# am_claim's new-mail claim written once (the redelivery part first, falling through to it);
# 12: am_usage and am_budgets (what the team costs; SQLite schema 10); 13: the message type
# ``interrupt`` in the type CHECK (SQLite schema 11).
# An older database is brought up in the same locked transaction.
PG_SCHEMA_VERSION = 13
# Step N is sql/migrations/pg_N.sql; a change of functions.sql that existing databases must
# receive comes with a new version (its step may hold nothing but a comment).
_STEPS: dict[int, str] = {v: f"migrations/pg_{v}.sql" for v in range(1, PG_SCHEMA_VERSION + 1)}
FUNCTIONS = "functions.sql"

# Any constant both processes agree on: the advisory lock "agentmaild schema migration".
_MIGRATION_LOCK = 0x616D_6D69_6772  # "ammigr"

_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS am_schema_version ("
    " id integer PRIMARY KEY CHECK (id = 1), version integer NOT NULL)"
)


def statements(script: str) -> list[str]:
    """A schema script split at its ``-- ;`` separator lines, comment-only lines dropped."""
    chunks: list[str] = []
    current: list[str] = []
    for line in read_sql(script).splitlines():
        if line.strip() == "-- ;":
            chunks.append("\n".join(current))
            current = []
        elif not line.lstrip().startswith("--"):
            current.append(line)
    chunks.append("\n".join(current))
    return [c.strip() for c in chunks if c.strip()]


def _run(conn: Conn, script: str) -> None:
    for stmt in statements(script):
        conn.execute(stmt.encode())  # bytes: "%" in SQL is not a placeholder here


def apply_functions(conn: Conn) -> None:
    """(Re)create every server-side function and trigger of ``functions.sql``, in one
    transaction (``store check``'s repairs in tests; ``migrate`` does it after its steps)."""
    with conn.transaction():
        _run(conn, FUNCTIONS)


def defined_in_functions() -> tuple[list[str], list[str]]:
    """The names of the functions and of the triggers ``functions.sql`` creates, in its order."""
    import re

    text = read_sql(FUNCTIONS)
    functions = re.findall(r"^CREATE OR REPLACE FUNCTION (\w+)\(", text, flags=re.M)
    triggers = re.findall(r"^CREATE OR REPLACE TRIGGER (\w+)", text, flags=re.M)
    return functions, triggers


def current_version(conn: Conn) -> int:
    """The database's schema version; 0 when agentmaild never migrated it."""
    row = conn.execute("SELECT to_regclass('am_schema_version') IS NOT NULL AS ok").fetchone()
    if not row or not row["ok"]:
        return 0
    found = conn.execute("SELECT version FROM am_schema_version WHERE id = 1").fetchone()
    return int(found["version"]) if found else 0


def migrate(conn: Conn) -> int:
    """Bring the database to ``PG_SCHEMA_VERSION``; returns the version it found."""
    if current_version(conn) >= PG_SCHEMA_VERSION:
        return PG_SCHEMA_VERSION
    with conn.transaction():
        # The lock first: even `CREATE TABLE IF NOT EXISTS` races with itself without it.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(_VERSION_TABLE)
        found = current_version(conn)  # a statement after the lock: sees the winner's commit
        for version in range(found + 1, PG_SCHEMA_VERSION + 1):
            _run(conn, _STEPS[version])
        _run(conn, FUNCTIONS)
        conn.execute(
            "INSERT INTO am_schema_version (id, version) VALUES (1, %s) "
            "ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version",
            (max(found, PG_SCHEMA_VERSION),),
        )
    return found
