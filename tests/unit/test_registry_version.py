"""The registry version: moves with agents' registrations, not with mail or hook turn state."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.aio import PollGate
from agentmaild.store.migrate import SCHEMA_VERSION
from agentmaild.store.sqlite import SqliteMailStore


def _version(store: SqliteMailStore) -> int:
    return int(store.connection.execute("SELECT version FROM am_registry").fetchone()[0])


def test_registrations_move_the_version_mail_and_turn_state_do_not(tmp_path: Path) -> None:
    store = SqliteMailStore(tmp_path / "mail.db")
    v0 = _version(store)
    store.add_agent(Agent(name="b1", capability="builder"))
    v1 = _version(store)
    assert v1 > v0
    Mailer(store).send(sender="lead", to="b1", subject="s", body="b")
    # What the hooks write on every prompt: turn state and session id only.
    store.connection.execute(
        "UPDATE am_agents SET turn_state = 'busy', turn_state_at = 'x', session_id = 's'"
        " WHERE name = 'b1'"
    )
    assert _version(store) == v1
    store.update_agent("b1", {"channel": "spawn", "command": ("true",)})
    v2 = _version(store)
    assert v2 > v1
    store.set_agent_state("b1", "working")
    v3 = _version(store)
    assert v3 > v2
    store.remove_agent("b1")
    assert _version(store) > v3
    store.close()


async def test_the_poll_gate_reads_the_version_other_connections_write(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    store = SqliteMailStore(db)
    gate = await PollGate.open(db)
    try:
        before = await gate.registry_version()
        store.add_agent(Agent(name="b1", capability="builder"))
        assert await gate.registry_version() == before + 1
    finally:
        await gate.aclose()
        store.close()


def test_a_version_1_store_is_upgraded_with_the_registry_and_seen_tables(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    SqliteMailStore(db).close()
    conn = sqlite3.connect(db)
    conn.executescript(
        "DROP TRIGGER am_registry_on_insert; DROP TRIGGER am_registry_on_delete;"
        "DROP TRIGGER am_registry_on_update; DROP TABLE am_registry; DROP TABLE am_prompt_seen;"
        "PRAGMA user_version = 1;"
    )
    conn.close()
    store = SqliteMailStore(db)
    assert store.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    v0 = _version(store)
    store.add_agent(Agent(name="b1", capability="builder"))
    assert _version(store) == v0 + 1
    assert store.connection.execute("SELECT count(*) FROM am_prompt_seen").fetchone()[0] == 0
    store.close()
