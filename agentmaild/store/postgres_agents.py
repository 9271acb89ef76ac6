"""The agent registry operations of the PostgreSQL store: add, get, list, update, state, remove."""

from __future__ import annotations

from typing import Any

from psycopg import errors as pg_errors

from agentmaild.errors import Conflict, NotFound, StoreError
from agentmaild.ids import iso_now
from agentmaild.models import Agent
from agentmaild.store.base import AGENT_MUTABLE_FIELDS
from agentmaild.store.postgres_rows import agent_from_row, agent_params
from agentmaild.store.postgres_tx import PQ, Conn, PostgresTransactions, Row, one
from agentmaild.store.sqlite_agents import check_transition, updated

# Built from AGENT_MUTABLE_FIELDS so the statement and the rule cannot drift apart.
_UPDATE_SETS = ", ".join(
    f"{k} = %({k})s" for k in (*sorted(AGENT_MUTABLE_FIELDS), "turn_state_at", "updated_at")
)
_UPDATE_SQL = f"UPDATE am_agents SET {_UPDATE_SETS} WHERE name = %(name)s"


def _current(conn: Conn, name: str) -> Row:
    row = one(conn, PQ["agent_get"], {"name": name})
    if row is None:
        raise NotFound(f"no agent named {name!r}")
    return row


class PostgresAgents(PostgresTransactions):
    """The ``MailStore`` agent registry operations on PostgreSQL."""

    def add_agent(self, agent: Agent) -> Agent:
        stamp = iso_now()
        stored = Agent(
            **{**agent.to_dict(), "command": agent.command, "created_at": stamp,
               "updated_at": stamp}
        )

        def run(conn: Conn) -> Agent:
            if one(conn, PQ["agent_get"], {"name": agent.name}) is not None:
                raise Conflict(f"agent {agent.name!r} already exists")
            conn.execute(PQ["agent_insert"], agent_params(stored))
            return stored

        try:
            return self._write(run)
        except StoreError as exc:
            if isinstance(exc.__cause__, pg_errors.UniqueViolation):  # a racing add won
                raise Conflict(f"agent {agent.name!r} already exists") from exc
            raise

    def get_agent(self, name: str) -> Agent | None:
        rows = self._read(PQ["agent_get"], {"name": name})
        return agent_from_row(rows[0]) if rows else None

    def list_agents(self) -> list[Agent]:
        return [agent_from_row(r) for r in self._read(PQ["agent_list"])]

    def update_agent(self, name: str, changes: dict[str, Any]) -> Agent:
        bad = set(changes) - AGENT_MUTABLE_FIELDS
        if bad:
            raise StoreError(f"cannot change agent field(s): {', '.join(sorted(bad))}")

        def run(conn: Conn) -> Agent:
            conn.execute("SELECT 1 FROM am_agents WHERE name = %(name)s FOR UPDATE", {"name": name})
            agent = updated(agent_from_row(_current(conn, name)), changes)
            conn.execute(_UPDATE_SQL, agent_params(agent))
            return agent

        return self._write(run)

    def set_agent_state(self, name: str, state: str, *, force: bool = False) -> Agent:
        def run(conn: Conn) -> Agent:
            conn.execute("SELECT 1 FROM am_agents WHERE name = %(name)s FOR UPDATE", {"name": name})
            check_transition(name, _current(conn, name)["state"], state, force)
            row = one(conn, PQ["agent_set_state"], {"state": state, "stamp": iso_now(),
                                                     "name": name})
            assert row is not None  # locked above: it cannot have gone
            return agent_from_row(row)

        return self._write(run)

    def remove_agent(self, name: str) -> None:
        def run(conn: Conn) -> None:
            if conn.execute(PQ["agent_delete"], {"name": name}).rowcount == 0:
                raise NotFound(f"no agent named {name!r}")
            conn.execute(PQ["queue_forget_agent"], {"agent": name})

        self._write(run)
