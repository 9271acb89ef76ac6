"""The agent registry, written once over the connector: add, get, list, update, state, remove.

A read-modify-write (an update, a state change) reads the row with ``agent_get_for_update``,
which PostgreSQL's dialect locks (SQLite's writer holds the file already).
"""

from __future__ import annotations

from typing import Any

from agentmaild.errors import Conflict, NotFound, StateError, StoreError
from agentmaild.ids import iso_now
from agentmaild.models import STATE_TRANSITIONS, Agent
from agentmaild.store.connector import Duplicate, OverConnector, Row, Tx
from agentmaild.store.records import AGENT_MUTABLE_FIELDS


def agent_from_row(tx: Tx, row: Row) -> Agent:
    command = tx.from_json(row["command"])
    return Agent(
        name=row["name"],
        capability=row["capability"],
        parent=row["parent"],
        state=row["state"],
        channel=row["channel"],
        command=tuple(command) if command is not None else None,
        cwd=row["cwd"],
        tmux_target=row["tmux_target"],
        tmux_socket=row["tmux_socket"],
        preset=row["preset"],
        session_id=row["session_id"],
        poll_interval_s=row["poll_interval_s"],
        settings=dict(tx.from_json(row["settings"]) or {}),
        turn_state=row["turn_state"],
        turn_state_at=row["turn_state_at"],
        shutdown_requested_at=row["shutdown_requested_at"],
        host=row["host"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def agent_params(tx: Tx, agent: Agent) -> dict[str, Any]:
    """The named parameters of ``agent_insert`` and ``agent_update`` (JSON columns encoded)."""
    d = agent.to_dict()
    d["command"] = tx.json(list(agent.command)) if agent.command is not None else None
    d["settings"] = tx.json(agent.settings)
    return d


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


def _current(tx: Tx, name: str) -> Row:
    row = tx.fetch_one("agent_get_for_update", {"name": name})
    if row is None:
        raise NotFound(f"no agent named {name!r}")
    return row


def _exists(name: str) -> Conflict:
    return Conflict(f"agent {name!r} already exists")


class StoreAgents(OverConnector):
    """The ``MailStore`` agent registry operations, for every SQL store."""

    def add_agent(self, agent: Agent) -> Agent:
        stamp = iso_now()
        fields = {**agent.to_dict(), "command": agent.command}
        stored = Agent(**{**fields, "created_at": stamp, "updated_at": stamp})

        def run(tx: Tx) -> Agent:
            if tx.fetch_one("agent_get", {"name": agent.name}) is not None:
                raise _exists(agent.name)
            tx.execute("agent_insert", agent_params(tx, stored))
            return stored

        try:
            return self.db.write(run)
        except Duplicate as exc:  # a racing add won between the look and the insert
            raise _exists(agent.name) from exc

    def get_agent(self, name: str) -> Agent | None:
        def run(tx: Tx) -> Agent | None:
            row = tx.fetch_one("agent_get", {"name": name})
            return agent_from_row(tx, row) if row is not None else None

        return self.db.read(run)

    def list_agents(self) -> list[Agent]:
        return self.db.read(lambda tx: [agent_from_row(tx, r) for r in tx.fetch_all("agent_list")])

    def update_agent(self, name: str, changes: dict[str, Any]) -> Agent:
        bad = set(changes) - AGENT_MUTABLE_FIELDS
        if bad:
            raise StoreError(f"cannot change agent field(s): {', '.join(sorted(bad))}")

        def run(tx: Tx) -> Agent:
            agent = updated(agent_from_row(tx, _current(tx, name)), changes)
            tx.execute("agent_update", agent_params(tx, agent))
            return agent

        return self.db.write(run)

    def set_agent_state(self, name: str, state: str, *, force: bool = False) -> Agent:
        def run(tx: Tx) -> Agent:
            check_transition(name, _current(tx, name)["state"], state, force)
            params = {"state": state, "stamp": iso_now(), "name": name}
            row = tx.fetch_one("agent_set_state", params)
            assert row is not None  # read (and on PostgreSQL locked) above: it cannot have gone
            return agent_from_row(tx, row)

        return self.db.write(run)

    def remove_agent(self, name: str) -> None:
        def run(tx: Tx) -> None:
            if tx.execute("agent_delete", {"name": name}) == 0:
                raise NotFound(f"no agent named {name!r}")
            tx.execute("queue_forget_agent", {"agent": name})

        self.db.write(run)
