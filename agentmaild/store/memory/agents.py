"""The registry of the in-memory fake: agents (add, get, list, update, state, remove) and work-queue
membership and status (queue claims: ``memory.deliveries``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agentmaild.errors import Conflict, NotFound, StateError, StoreError
from agentmaild.ids import iso_now
from agentmaild.models import QUEUE_PREFIX, STATE_TRANSITIONS, Agent, QueueInfo
from agentmaild.store.memory.state import MemoryState, atomic
from agentmaild.store.records import AGENT_MUTABLE_FIELDS


class MemoryAgents(MemoryState):
    """The ``MailStore`` agent registry operations over the fake's dicts."""

    @atomic
    def add_agent(self, agent: Agent) -> Agent:
        if agent.name in self._agents:
            raise Conflict(f"agent {agent.name!r} already exists")
        stamp = iso_now()
        self._agents[agent.name] = stored = replace(agent, created_at=stamp, updated_at=stamp)
        return stored

    @atomic
    def get_agent(self, name: str) -> Agent | None:
        return self._agents.get(name)

    @atomic
    def list_agents(self) -> list[Agent]:
        return [self._agents[n] for n in sorted(self._agents)]

    @atomic
    def _change_agent(self, name: str, change: Callable[[Agent], Agent]) -> Agent:
        current = self._agents.get(name)
        if current is None:
            raise NotFound(f"no agent named {name!r}")
        self._agents[name] = agent = change(current)
        return agent

    def update_agent(self, name: str, changes: dict[str, Any]) -> Agent:
        bad = set(changes) - AGENT_MUTABLE_FIELDS
        if bad:
            raise StoreError(f"cannot change agent field(s): {', '.join(sorted(bad))}")
        fields = dict(changes)
        if fields.get("command") is not None:
            fields["command"] = tuple(fields["command"])
        fields["updated_at"] = stamp = iso_now()
        if "turn_state" in changes:
            fields["turn_state_at"] = stamp
        return self._change_agent(name, lambda a: replace(a, **fields))

    def set_agent_state(self, name: str, state: str, *, force: bool = False) -> Agent:
        def change(a: Agent) -> Agent:
            if state not in STATE_TRANSITIONS:
                raise StateError(f"unknown state {state!r}")
            if not force and a.state != state and state not in STATE_TRANSITIONS[a.state]:
                allowed = ", ".join(sorted(STATE_TRANSITIONS[a.state]))
                raise StateError(
                    f"agent {name}: cannot go from {a.state} to {state} (allowed: {allowed})"
                )
            return replace(a, state=state, updated_at=iso_now())

        return self._change_agent(name, change)

    @atomic
    def remove_agent(self, name: str) -> None:
        if self._agents.pop(name, None) is None:
            raise NotFound(f"no agent named {name!r}")
        for queue in [q for q, members in self._queue_members.items() if name in members]:
            self._queue_members[queue].discard(name)
            if not self._queue_members[queue]:
                del self._queue_members[queue]


class MemoryQueues(MemoryState):
    """The ``MailStore`` work-queue operations over the fake's dicts."""

    @atomic
    def join_queue(self, queue: str, agent: str) -> None:
        if agent not in self._agents:
            raise NotFound(f"no agent named {agent!r}")
        self._queue_members.setdefault(queue, set()).add(agent)

    @atomic
    def leave_queue(self, queue: str, agent: str) -> bool:
        members = self._queue_members.get(queue, set())
        if agent not in members:
            return False
        members.discard(agent)
        if not members:
            del self._queue_members[queue]
        return True

    @atomic
    def queue_members(self, queue: str) -> list[str]:
        return sorted(self._queue_members.get(queue, ()))

    @atomic
    def queues(self) -> list[QueueInfo]:
        depth: dict[str, int] = {}
        for m in self._messages.values():
            if m.to_agent.startswith(QUEUE_PREFIX) and not m.read:
                if m.delivery_id is None or self._in_state(m, "pending"):
                    name = m.to_agent[len(QUEUE_PREFIX) :]
                    depth[name] = depth.get(name, 0) + 1
        held: dict[str, list[tuple[str, str, int]]] = {}
        for d in sorted(self._deliveries.values(), key=lambda d: (d.agent, d.id)):
            if d.state == "claimed" and d.queue is not None:
                held.setdefault(d.queue, []).append((d.agent, d.id, d.attempts))
        names = sorted(set(self._queue_members) | set(depth) | set(held))
        return [
            QueueInfo(
                name=n,
                members=tuple(sorted(self._queue_members.get(n, ()))),
                depth=depth.get(n, 0),
                held=tuple(held.get(n, ())),
            )
            for n in names
        ]
