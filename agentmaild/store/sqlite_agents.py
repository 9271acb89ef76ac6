"""The agent registry operations of the SQLite store: add, get, list, update, state, remove."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentmaild.errors import Conflict, NotFound, StateError, StoreError
from agentmaild.ids import iso_now
from agentmaild.models import STATE_TRANSITIONS, Agent
from agentmaild.store.base import AGENT_MUTABLE_FIELDS
from agentmaild.store.queries import Q
from agentmaild.store.sqlite_rows import agent_from_row, agent_params
from agentmaild.store.sqlite_tx import SqliteTransactions

# Built from AGENT_MUTABLE_FIELDS so the statement and the rule cannot drift apart.
_UPDATE_SETS = ", ".join(
    f"{k} = :{k}" for k in (*AGENT_MUTABLE_FIELDS, "turn_state_at", "updated_at")
)
_UPDATE_SQL = f"UPDATE am_agents SET {_UPDATE_SETS} WHERE name = :name"


def _current(conn: sqlite3.Connection, name: str) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute(Q["agent_get"], {"name": name}).fetchone()
    if row is None:
        raise NotFound(f"no agent named {name!r}")
    return row


def updated(current: Agent, changes: dict[str, Any]) -> Agent:
    merged = {**current.to_dict(), **changes, "updated_at": iso_now()}
    if "turn_state" in changes:
        merged["turn_state_at"] = merged["updated_at"]
    merged["command"] = tuple(merged["command"]) if merged["command"] is not None else None
    return Agent(**merged)


def check_transition(name: str, current: str, state: str, force: bool) -> None:
    if state not in STATE_TRANSITIONS:
        raise StateError(f"unknown state {state!r}")
    if not force and current != state and state not in STATE_TRANSITIONS[current]:
        allowed = ", ".join(sorted(STATE_TRANSITIONS[current]))
        raise StateError(f"agent {name}: cannot go from {current} to {state} (allowed: {allowed})")


class SqliteAgents(SqliteTransactions):
    """The ``MailStore`` agent registry operations on SQLite."""

    def add_agent(self, agent: Agent) -> Agent:
        stamp = iso_now()
        stored = Agent(
            **{
                **agent.to_dict(),
                "command": agent.command,
                "created_at": stamp,
                "updated_at": stamp,
            }
        )

        def run(conn: sqlite3.Connection) -> Agent:
            if conn.execute(Q["agent_get"], {"name": agent.name}).fetchone() is not None:
                raise Conflict(f"agent {agent.name!r} already exists")
            conn.execute(Q["agent_insert"], agent_params(stored))
            return stored

        return self._write(run)

    def get_agent(self, name: str) -> Agent | None:
        rows = self._read(Q["agent_get"], {"name": name})
        return agent_from_row(rows[0]) if rows else None

    def list_agents(self) -> list[Agent]:
        return [agent_from_row(r) for r in self._read(Q["agent_list"])]

    def update_agent(self, name: str, changes: dict[str, Any]) -> Agent:
        bad = set(changes) - AGENT_MUTABLE_FIELDS
        if bad:
            raise StoreError(f"cannot change agent field(s): {', '.join(sorted(bad))}")

        def run(conn: sqlite3.Connection) -> Agent:
            agent = updated(agent_from_row(_current(conn, name)), changes)
            conn.execute(_UPDATE_SQL, agent_params(agent))
            return agent

        return self._write(run)

    def set_agent_state(self, name: str, state: str, *, force: bool = False) -> Agent:
        def run(conn: sqlite3.Connection) -> Agent:
            check_transition(name, _current(conn, name)["state"], state, force)
            params = {"state": state, "stamp": iso_now(), "name": name}
            return agent_from_row(conn.execute(Q["agent_set_state"], params).fetchone())

        return self._write(run)

    def remove_agent(self, name: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            if conn.execute(Q["agent_delete"], {"name": name}).rowcount == 0:
                raise NotFound(f"no agent named {name!r}")
            conn.execute(Q["queue_forget_agent"], {"agent": name})

        self._write(run)
