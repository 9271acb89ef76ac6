"""Crash recovery at start: stop a dead daemon's surviving agent processes, re-queue its claims,
and report the interrupted agents."""

from __future__ import annotations

import time
from typing import Any

import structlog

from agentmaild.daemon.orphans import stop_orphans
from agentmaild.ids import iso_now, new_id
from agentmaild.mail.mailer import DAEMON_SENDER, OPERATOR
from agentmaild.models import Agent, ChannelKind, Message
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.records import InsertRequest

log = structlog.get_logger(__name__)

# Agents whose process the daemon owned: a "busy" turn state left behind died with it.
_OWNED_CHANNELS = frozenset({ChannelKind.SPAWN, ChannelKind.STDIN})


async def recover(
    store: AsyncMailStore,
    target: str | None = None,
    *,
    kill_grace_s: float = 5.0,
    host: str | None = None,
) -> dict[str, Any]:
    """Before any loop runs: stop the agent processes a dead daemon left running (those it
    journalled and, with ``target``, those marked as started for the store it names: an agent's
    ``AGENTMAIL_DB``), re-queue every claim
    (its daemon is gone), reset owned busy agents, and tell each interrupted agent's parent (else
    the operator) in one mail."""
    # Stopped first: a redelivered turn must never run beside the interrupted one.
    rows = await store.run_sync(store.sync.list_procs)
    for row in await stop_orphans(rows, target, kill_grace_s):
        await store.run_sync(store.sync.forget_proc, row.pid, row.start_time)
    # We hold the lock of our host, so every claim of its agents belongs to a dead daemon, however
    # long its lease (another host's claims are its live daemon's).
    reaped = await store.reap_expired(now=time.time(), everything=True, host=host)
    agents = {a.name: a for a in await store.list_agents()}
    reset = [
        a.name for a in agents.values() if a.turn_state == "busy" and a.channel in _OWNED_CHANNELS
    ]
    for name in reset:
        await store.update_agent(name, {"turn_state": None})
    interrupted: dict[str, list[str]] = {}
    for delivery_id, agent in reaped:
        interrupted.setdefault(agent, []).append(f"delivery {delivery_id} re-queued")
    for name in reset:
        interrupted.setdefault(name, []).append("turn state was busy; reset")
    if interrupted:
        await store.run_sync(_report_interrupted, store.sync, agents, interrupted)
    log.info("daemon.recovered", requeued=len(reaped), reset_busy=len(reset),
             interrupted=sorted(interrupted))
    return {"requeued": reaped, "reset": reset}


def _report_interrupted(
    sync_store: Any, agents: dict[str, Agent], interrupted: dict[str, list[str]]
) -> None:
    by_parent: dict[str, list[str]] = {}
    for name, what in sorted(interrupted.items()):
        agent = agents.get(name)
        parent = agent.parent if agent is not None and agent.parent else OPERATOR
        by_parent.setdefault(parent, []).extend(f"- {name}: {item}" for item in what)
    now = time.time()
    for parent, lines in by_parent.items():
        count = len({line.split(":", 1)[0] for line in lines})
        report = Message(
            id=new_id("msg"), from_agent=DAEMON_SENDER, to_agent=parent,
            subject=f"agentmaild restarted: {count} agent(s) were interrupted",
            body="The previous agentmaild stopped without shutting down cleanly. Interrupted:\n"
            + "\n".join(lines)
            + "\nRe-queued batches are redelivered with their original delivery ids.",
            type="status", priority="high", created_at=iso_now(now),
        )
        sync_store.insert(InsertRequest(messages=(report,), now=now,
                                        nudges=((parent, report.id, "high status"),)))
