"""The team as ``status`` shows it: the daemon's live rows (busy, in flight, loop), else the
store's own counts when no daemon answers. ``agentmaild status`` and the MCP ``team`` tool both
read it here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentmaild.errors import DaemonNotAnswering, DaemonNotRunning
from agentmaild.store.location import StoreLocation


def offline_status(location: StoreLocation) -> dict[str, Any]:
    """The status rows from the store alone (no daemon: nothing is in a turn, no loop runs)."""
    from agentmaild.hot.access import store_at
    from agentmaild.rules.members import status_row
    from agentmaild.rules.report import rules_status

    store = store_at(location.target, readonly=True)
    try:
        counts, agents, totals = store.counts(), store.list_agents(), store.totals()
        rules = rules_status(store)
    finally:
        store.close()
    rows = [status_row(agent, counts.get(agent.name), None) for agent in agents]
    return {"daemon": None, "agents": rows, "totals": totals, "rules": rules}


def team_status(
    location: StoreLocation, socket: Path, timeout_s: float, args: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The daemon's ``status`` reply (checked; ``args`` as the command takes them), else
    ``offline_status``; ``running`` says which."""
    from agentmaild.control.client import request
    from agentmaild.control.replies import check_status

    running = True
    try:
        result = check_status(request(socket, "status", args, timeout_s))
    except DaemonNotRunning:
        result, running = offline_status(location), False
    except DaemonNotAnswering:  # stopped, wedged or flooded: something listens but says nothing
        result = offline_status(location)
        result["note"] = f"did not answer within {timeout_s:g}s; counts read from the store"
    result["running"] = running
    return result
