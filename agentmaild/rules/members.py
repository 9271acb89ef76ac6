"""Agent status vocabulary: a coarse member status and a fine execution status (``models``).

``set_status`` takes either vocabulary — a registry state (``booting working idle stalled
completed zombie``, the transition table of ``STATE_TRANSITIONS``) or a member status (``ready
busy shutdown_requested shutdown error``, guarded by ``MEMBER_TRANSITIONS``, then stored as the
registry state ``STATE_OF_MEMBER`` names). ``shutdown_requested`` is a flag: the agent keeps its
state (and its mail) until it reports ``shutdown``; queues stop handing it work meanwhile.
"""

from __future__ import annotations

from typing import Any

from agentmaild.errors import NotFound, StateError
from agentmaild.ids import iso_now
from agentmaild.models import REFUSED_STATES, STATE_TRANSITIONS, Agent
from agentmaild.models_status import (
    EXEC_OF_LOOP,
    EXEC_OF_TURN,
    MEMBER_TRANSITIONS,
    STATE_OF_MEMBER,
    ExecutionStatus,
)
from agentmaild.store.base import MailStore

WORDS = (*STATE_TRANSITIONS, *MEMBER_TRANSITIONS)


def execution_status(agent: Agent, loop_state: str | None) -> str:
    """The loop's state when the daemon runs one for the agent, else what its hooks reported."""
    if loop_state is not None:
        return EXEC_OF_LOOP.get(loop_state, ExecutionStatus.UNKNOWN.value)
    if agent.turn_state is not None:
        return EXEC_OF_TURN.get(agent.turn_state, ExecutionStatus.UNKNOWN.value)
    return ExecutionStatus.UNKNOWN.value


def status_fields(agent: Agent, loop_state: str | None) -> dict[str, Any]:
    """The two status columns of a ``status`` row."""
    return {"member": agent.member_status, "exec": execution_status(agent, loop_state)}


def status_row(agent: Agent, counts: Any, loop: dict[str, Any] | None) -> dict[str, Any]:
    """One agent's row of ``status``: the store's counts (``AgentCounts`` or None) and, when a
    daemon answers, its loop's state (None: no loop runs — offline status)."""
    row: dict[str, Any] = {
        "agent": agent.name,
        "channel": agent.channel,
        "state": agent.state,
        "turn_state": agent.turn_state,
        "unread": counts.unread if counts else 0,
        "in_flight": counts.in_flight if counts else 0,
        "dead_letters": counts.dead_letters if counts else 0,
        "loop": None,
        **status_fields(agent, loop["state"] if loop is not None else None),
    }
    if loop is not None:
        row["loop"] = loop["state"]
        row.update({k: v for k, v in loop.items() if k not in ("state", "channel")})
    return row


def set_status(store: MailStore, name: str, word: str, *, force: bool = False) -> Agent:
    """Move ``name`` to a registry state or a member status (see the module docstring)."""
    if word in STATE_TRANSITIONS:
        agent = store.set_agent_state(name, word, force=force)
        return _clear_request(store, agent) if word in ("booting", *REFUSED_STATES) else agent
    if word not in MEMBER_TRANSITIONS:
        raise StateError(f"unknown state {word!r}; one of {', '.join(WORDS)}")
    found = store.get_agent(name)
    if found is None:
        raise NotFound(f"no agent named {name!r}")
    agent = found
    current = agent.member_status
    if not force and current != word and word not in MEMBER_TRANSITIONS[current]:
        allowed = ", ".join(sorted(MEMBER_TRANSITIONS[current]))
        raise StateError(f"agent {name}: cannot go from {current} to {word} (allowed: {allowed})")
    if word == "shutdown_requested":
        return store.update_agent(name, {"shutdown_requested_at": iso_now()})
    live, dead = STATE_OF_MEMBER[word]
    state = dead if agent.state in REFUSED_STATES else live
    if state != agent.state:
        # The member table above is the guard for this move; the state table has no say in it.
        agent = store.set_agent_state(name, state, force=True)
    return _clear_request(store, agent)


def _clear_request(store: MailStore, agent: Agent) -> Agent:
    if agent.shutdown_requested_at is None:
        return agent
    return store.update_agent(agent.name, {"shutdown_requested_at": None})
