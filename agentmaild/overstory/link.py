"""OverstoryLink: what a store in Overstory mode does beyond its own file.

It reads Overstory's registry (``sessions.db``) as a second source of agents, merges it with ours,
writes Overstory's pending-nudge files for our priority mail and clears a marker when the mail it
names is acked. ``SqliteMailStore`` carries one (``store.overstory``) when the mode is on.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace

import structlog

from agentmaild.errors import ValidationError
from agentmaild.ids import iso_now
from agentmaild.mail.vocab import OPERATOR
from agentmaild.models import Agent, Message
from agentmaild.overstory import nudges
from agentmaild.overstory.flavor import ORCHESTRATOR
from agentmaild.overstory.sessions import read_sessions, sessions_path
from agentmaild.store.checks import merged_state

log = structlog.get_logger(__name__)


class OverstoryLink:
    """The Overstory project next to one store file."""

    __slots__ = ("nudge_dir", "sessions_path")

    def __init__(self, db: str) -> None:
        self.sessions_path = sessions_path(db)
        self.nudge_dir = nudges.nudge_dir(db)

    # Names that need no registration in Overstory mode: our operator and Overstory's default.
    implicit = frozenset({OPERATOR, ORCHESTRATOR})

    # -- the registry -----------------------------------------------------------------------
    def agents(self) -> list[Agent]:
        """Overstory's agents as ours (pull channel: Overstory's hooks fetch their mail)."""
        return [
            Agent(name=n, capability=c, state=s, parent=p, created_at="", updated_at="")
            for n, c, s, p in read_sessions(self.sessions_path)
        ]

    def state_of(self, name: str) -> str | None:
        rows = read_sessions(self.sessions_path, name)
        return rows[0][2] if rows else None

    def capability_of(self, name: str) -> tuple[str, str | None] | None:
        rows = read_sessions(self.sessions_path, name)
        return (rows[0][1], rows[0][3]) if rows else None

    def merge(self, ours: Sequence[Agent]) -> list[Agent]:
        """One agent per name over both registries.

        A name both know is one agent, not two: Overstory's capability (so both tools put it in
        the same groups), our channel, and the merged state (terminal if either ended it).
        """
        theirs = {a.name: a for a in self.agents()}
        merged: list[Agent] = []
        for a in ours:
            other = theirs.pop(a.name, None)
            if other is None:
                merged.append(a)
                continue
            state = merged_state(a.state, other.state) or a.state
            merged.append(
                replace(
                    a, capability=other.capability, parent=a.parent or other.parent, state=state
                )
            )
        merged.extend(theirs.values())
        return sorted(merged, key=lambda a: a.name)

    def adopt(self, agent: Agent) -> Agent:
        """Our registration of an agent Overstory knows: its capability and parent, not a second
        identity. A capability that contradicts Overstory's is refused."""
        known = self.capability_of(agent.name)
        if known is None:
            return agent
        capability, parent = known
        if agent.capability and agent.capability != capability:
            raise ValidationError(
                f"capability: {agent.name} is a {capability} in Overstory's registry "
                f"({self.sessions_path}); register it as {capability} or leave --capability out"
            )
        return replace(agent, capability=capability, parent=agent.parent or parent)

    # -- banners ----------------------------------------------------------------------------
    def write_nudges(
        self, messages: Sequence[Message], nudged: Iterable[tuple[str, str, str]]
    ) -> None:
        """Overstory's marker for each nudged recipient: the last of its messages wins."""
        by_id = {m.id: m for m in messages}
        latest: dict[str, Message] = {}
        for agent, message_id, _reason in nudged:
            if message_id in by_id:
                latest[agent] = by_id[message_id]
        for agent, m in latest.items():
            marker = {
                "from": m.from_agent,
                "reason": nudges.reason_for(m.type, m.priority),
                "subject": m.subject,
                "messageId": m.id,
                "createdAt": iso_now(time.time()),
            }
            try:
                nudges.write(self.nudge_dir, agent, marker)
            except (
                OSError,
                ValueError,
            ) as exc:  # the mail is stored; a banner is not worth an error
                log.warning("overstory.nudge_failed", agent=agent, error=str(exc))

    def clear_acked(self, acked: Iterable[tuple[str, str]]) -> None:
        """Drop the markers that name mail just acked (``(agent, message_id)`` pairs)."""
        by_agent: dict[str, set[str]] = {}
        for agent, message_id in acked:
            by_agent.setdefault(agent, set()).add(message_id)
        for agent, ids in by_agent.items():
            nudges.clear_pointing_at(self.nudge_dir, agent, ids)
