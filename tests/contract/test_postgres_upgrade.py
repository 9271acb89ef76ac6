"""A PostgreSQL store of schema version 1 (before tokens, team rules and queues) upgrades in
place to the current version: its mail and agents kept, the new tables and columns usable."""

from __future__ import annotations

from dataclasses import replace

import psycopg

from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Message
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_migrate import PG_SCHEMA_VERSION, defined_in_functions, statements
from agentmaild.store.records import InsertRequest
from agentmaild.trust.tokens import ApiToken
from tests.support.pg import PgDatabases

T0 = 1_700_000_000.0


def _version_1(dsn: str) -> None:
    """The database as agentmaild's first PostgreSQL schema left it, with one agent and mail."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for stmt in statements("migrations/pg_1.sql"):
            conn.execute(stmt.encode())
        conn.execute(
            "CREATE TABLE am_schema_version (id integer PRIMARY KEY CHECK (id = 1),"
            " version integer NOT NULL)"
        )
        conn.execute("INSERT INTO am_schema_version VALUES (1, 1)")
        conn.execute(
            "INSERT INTO am_agents (name, capability, state, channel, created_at, updated_at)"
            " VALUES ('bob', 'builder', 'idle', 'spawn', 'x', 'x')"
        )
        conn.execute(
            "INSERT INTO messages (id, from_agent, to_agent, subject, body, created_at)"
            " VALUES ('msg-old', 'lead', 'queue:work', 's', 'b', %s)",
            (iso_now(T0),),
        )


def test_a_version_1_store_upgrades_and_keeps_its_rows(pg_databases: PgDatabases) -> None:
    dsn = pg_databases.create(migrated=False)
    _version_1(dsn)
    assert PG_SCHEMA_VERSION == 13
    store = PostgresMailStore(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM am_schema_version").fetchone() == (13,)
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes")}
        assert {"am_idx_messages_fts", "am_idx_messages_newest"} <= indexes  # schema 5's
        found = conn.execute("SELECT to_regproc('am_send_one') IS NOT NULL").fetchone()
        assert found == (True,)  # schema 6's
        found = conn.execute(
            "SELECT to_regproc('am_claim') IS NOT NULL AND to_regproc('am_ack') IS NOT NULL"
        ).fetchone()
        assert found == (True,)  # schema 7's (schema 8 replaced them)
        triggers = {r[0] for r in conn.execute("SELECT tgname FROM pg_trigger")}
        assert {"am_agent_ending_on_update", "am_agent_ending_on_delete"} <= triggers  # 9's
        found = conn.execute(
            "SELECT relpersistence FROM pg_class WHERE relname = 'am_recent_sends'").fetchone()
        assert found == ("u",)  # 9's: the loop guard's cache writes no WAL
    assert store.team_rules() == {}  # 10's table, empty until a daemon writes the team rules
    assert store.usage_since(0) == [] and store.budget_mark("bob") is None  # 12's tables
    assert store.set_team_rules({"pingpong_max": 3}, now=T0)
    assert store.team_rules() == {"pingpong_max": 3}
    bob = store.get_agent("bob")
    assert bob is not None and bob.shutdown_requested_at is None and bob.host is None
    # The old mail to a queue becomes claimable once bob joins it.
    store.join_queue("work", "bob")
    batch = store.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0)
    assert batch is not None and batch.message_ids == ("msg-old",)
    assert store.queues()[0].held == (("bob", batch.delivery_id, 1),)
    store.add_token(ApiToken(id="t1", agent="bob", scopes=("read",), hash="h", created_at=T0))
    assert [t.id for t in store.list_tokens()] == ["t1"]
    assert store.claim_nonce("n", peer="a", expires_at=T0 + 300, now=T0)  # schema 3's tables
    assert store.list_peers() == [] and store.relay_pending() == []
    store.close()
    PostgresMailStore(dsn).close()  # a second open finds nothing to do
    pg_databases.drop(dsn)


def test_an_upgraded_store_takes_a_send_with_the_loop_guard(pg_databases: PgDatabases) -> None:
    dsn = pg_databases.create(migrated=False)
    _version_1(dsn)
    store = PostgresMailStore(dsn)
    store.add_agent(Agent(name="carol", capability="builder"))
    m = Message(id=new_id("msg"), from_agent="bob", to_agent="carol", subject="s", body="b",
                created_at=iso_now(T0))  # fmt: skip
    first = store.insert(InsertRequest(messages=(m,), now=T0, collapse=("d", 60.0)))
    repeat = replace(m, id=new_id("msg"))
    second = store.insert(InsertRequest(messages=(repeat,), now=T0 + 1, collapse=("d", 60.0)))
    assert (first.collapsed, second.collapsed) == (False, True)
    assert [x.id for x in second.messages] == [m.id]
    assert store.rule_counters()["collapsed"] == 1
    store.close()
    pg_databases.drop(dsn)


def _server_code(dsn: str) -> dict[str, str]:
    """Every function and trigger functions.sql makes, as the database now defines it."""
    functions, triggers = defined_in_functions()
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = {
            name: str(row[0])
            for name in functions
            for row in conn.execute(
                "SELECT pg_get_functiondef(oid) FROM pg_proc WHERE proname = %s", (name,)
            )
        }
        found |= {
            name: str(row[0])
            for name in triggers
            for row in conn.execute(
                "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = %s", (name,)
            )
        }
    return found


def test_an_upgraded_store_ends_with_the_current_functions(pg_databases: PgDatabases) -> None:
    """Step by step from version 1, a database ends with functions.sql's definitions, exactly
    those a new database gets: no step leaves an older body behind."""
    old = pg_databases.create(migrated=False)
    _version_1(old)
    PostgresMailStore(old).close()
    new = pg_databases.create(migrated=False)
    PostgresMailStore(new).close()
    functions, triggers = defined_in_functions()
    upgraded = _server_code(old)
    assert sorted(upgraded) == sorted(functions + triggers)
    assert upgraded == _server_code(new)
    pg_databases.drop(old)
    pg_databases.drop(new)


def test_no_migration_step_defines_a_function_or_trigger() -> None:
    for version in range(1, PG_SCHEMA_VERSION + 1):
        for stmt in statements(f"migrations/pg_{version}.sql"):
            head = " ".join(stmt.split()[:4]).upper()
            assert "FUNCTION" not in head or head.startswith("DROP"), (version, head)
            assert "TRIGGER" not in head, (version, head)
