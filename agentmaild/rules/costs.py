"""What the team costs, in figures: per agent and per thread over the last hour and the last day
(``HOUR_S``/``DAY_S``, rolling), each with turns, tokens in and out and the cost in USD (None when
no turn of it was priced by its CLI), and the agents with a budget (``rules.budget``: per UTC day).
``status`` shows them beside the operator's unread mail (``status_extras``: the daemon computes
them when it answers ``status`` with ``costs``, else the CLI from the store), as do
``deliveries --json`` and the dashboard.
"""

from __future__ import annotations

from typing import Any

HOUR_S = 3600.0
DAY_S = 86400.0
THREADS = 20


def figures(store: Any, now: float) -> dict[str, Any]:
    """Cost per agent and per thread, last hour and last day; budgets of agents that have one."""
    from agentmaild.rules.budget import budget_status

    windows = {}
    for label, span in (("hour", HOUR_S), ("day", DAY_S)):
        since = now - span
        windows[label] = {"agents": store.usage_by_agent(since),
                          "threads": store.usage_by_thread(since, THREADS)}  # fmt: skip
    states = [budget_status(store, a.name, now) for a in store.list_agents()]
    budgets = [s.to_dict() for s in states if s is not None and s.budget_usd is not None]
    return {**windows, "budgets": budgets}


STATUS_EXTRAS = ("operator_unread", "costs")


def status_extras(store: Any, now: float) -> dict[str, Any]:
    """What ``status`` adds to the team's rows: unread mail for ``operator`` (which no agent
    reads: reports, NDRs, daemon notices) and ``figures`` (None when they cannot be read)."""
    from agentmaild.errors import AgentmaildError
    from agentmaild.mail.vocab import OPERATOR

    mine = store.counts().get(OPERATOR)
    try:
        costs = figures(store, now)
    except AgentmaildError:
        costs = None
    return {"operator_unread": mine.unread if mine else 0, "costs": costs}
