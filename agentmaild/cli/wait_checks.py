"""One look at the store for ``agentmaild wait``: done, failed (and why), or not yet (and why).

Failed means it cannot succeed without someone acting: a dead letter (its error), a removed or
ended agent, a tmux pane that is gone or dead (its last lines). Not yet carries the last delivery
attempt's error, so a timeout can say why (an agent unavailable, a failed spawn).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import Any

from agentmaild.errors import NotFound
from agentmaild.mail.vocab import REFUSED_STATES
from agentmaild.models import QUEUE_PREFIX, Agent
from agentmaild.store.base import MailStore

PANE_LINES = 12


@dataclass(frozen=True)
class Outcome:
    done: bool
    why: str
    failed: bool = False
    details: dict[str, Any] = field(default_factory=dict)


def check_read(store: MailStore, message_id: str) -> Outcome:
    message = store.get_message(message_id)
    if message is None:
        raise NotFound(f"no message {message_id}")
    if message.read:
        details = {"agent": message.to_agent, "acked_by": message.acked_by}
        return Outcome(
            True, f"read by {message.to_agent} ({message.acked_by or '-'})", details=details
        )
    dead = [d for d in store.dead_letters(message.to_agent) if message_id in d.message_ids]
    if dead:
        return _dead(store, dead[0].delivery_id, dead[0].last_error, message.to_agent)
    return _agent_blocks(store, message.to_agent, f"unread by {message.to_agent}", message_id)


def check_acked(store: MailStore, delivery_id: str) -> Outcome:
    attempts = [a for a in store.list_attempts(limit=None) if a.delivery_id == delivery_id]
    if not attempts:
        dead = [d for d in store.dead_letters() if d.delivery_id == delivery_id]
        if dead:
            return _dead(store, delivery_id, dead[0].last_error, dead[0].agent)
        return Outcome(False, f"no attempt of {delivery_id} has finished yet")
    last = attempts[0]  # newest first
    if last.outcome == "acked":
        return Outcome(True, f"acked by {last.agent}", details={"agent": last.agent})
    if last.outcome == "dead":
        return _dead(store, delivery_id, last.error, last.agent)
    return _agent_blocks(store, last.agent, f"not acked ({last.outcome})", None)


def check_idle(store: MailStore, name: str) -> Outcome:
    agent = store.get_agent(name)
    if agent is None:
        raise NotFound(f"no agent {name}")
    if agent.turn_state is not None:  # a session that reports its turns (hooks): its word counts
        if agent.turn_state == "idle":
            return Outcome(True, "idle (its session's turn ended)", details={"agent": name})
        return _agent_blocks(store, name, f"{name}'s session is {agent.turn_state}", None)
    if agent.state == "idle":
        return Outcome(True, "idle", details={"agent": name})
    return _agent_blocks(store, name, f"{name} is {agent.state}", None)


def _dead(store: MailStore, delivery_id: str, error: str | None, name: str) -> Outcome:
    """A dead letter: its error, and a tmux agent's pane when that is gone or dead."""
    why = f"dead letter {delivery_id} for {name}: {error or 'no error recorded'}"
    details: dict[str, Any] = {"agent": name, "dead_letter": delivery_id, "last_error": error}
    agent = store.get_agent(name)
    pane = pane_failure(agent) if agent is not None and agent.channel == "tmux" else None
    if pane is not None:
        why += f"; {pane[0]}"
        details["pane_lines"] = pane[1]
    return Outcome(False, why, failed=True, details=details)


def _agent_blocks(store: MailStore, name: str, pending: str, message_id: str | None) -> Outcome:
    """Why ``name`` will not get there: gone, ended, its pane dead; else ``pending`` and the
    last attempt's error as the not-yet reason."""
    agent = store.get_agent(name)
    if agent is None and name != "operator" and not name.startswith(QUEUE_PREFIX):
        return Outcome(False, f"{pending}: agent {name} is not registered", failed=True,
                       details={"agent": name})  # fmt: skip
    if agent is not None and agent.state in REFUSED_STATES:
        return Outcome(False, f"{pending}: agent {name} is {agent.state}", failed=True,
                       details={"agent": name, "state": agent.state})  # fmt: skip
    if agent is not None and agent.channel == "tmux":
        pane = pane_failure(agent)
        if pane is not None:
            why, lines = pane
            return Outcome(False, f"{pending}: {why}", failed=True,
                           details={"agent": name, "pane_lines": lines})  # fmt: skip
    details: dict[str, Any] = {"agent": name, "state": agent.state if agent else None}
    last = store.list_attempts(agent=name, message_id=message_id, limit=1)
    if last and last[0].outcome != "acked":
        details["last_attempt"] = last[0].to_dict()
        pending += f"; last attempt {last[0].outcome}: {last[0].error or 'no error recorded'}"
    return Outcome(False, pending, details=details)


def pane_failure(agent: Agent) -> tuple[str, list[str]] | None:
    """``(why, last lines)`` when the agent's tmux pane is gone or dead, else None."""
    from agentmaild.channels.tmux_cmd import tmux_base
    from agentmaild.channels.tmux_screen import last_lines

    base, target = tmux_base(agent.tmux_socket), agent.tmux_target or ""
    shown = subprocess.run([*base, "display-message", "-p", "-t", target,
                            "#{pane_dead} #{pane_dead_status}"],
                           capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
    if shown.returncode != 0:
        return f"tmux pane {target} is gone ({shown.stderr.strip() or 'no such pane'})", []
    dead, _, status = shown.stdout.strip().partition(" ")
    if dead != "1":
        return None
    screen = subprocess.run([*base, "capture-pane", "-p", "-S", "-200", "-t", target],
                            capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
    lines = last_lines(screen.stdout, PANE_LINES)
    exited = f" (exit status {status})" if status.strip() else ""
    return f"tmux pane {target} is dead{exited}", lines
