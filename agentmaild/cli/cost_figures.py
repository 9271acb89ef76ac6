"""What the team costs, in figures: per agent and per thread over the last hour and the last day
(``HOUR_S``/``DAY_S``, rolling), each with turns, tokens in and out and the cost in USD (None when
no turn of it was priced by its CLI), and the agents with a budget (``rules.budget``: per UTC day);
as ``deliveries --json`` and ``status`` show them. Without typer (``status`` runs without it);
``cli.costs`` re-exports it beside the ``agents budget`` command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentmaild.models import Attempt

HOUR_S = 3600.0
DAY_S = 86400.0
THREADS = 20
SETTLE_S = 900.0


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


def with_usage(store: Any, found: list[Attempt]) -> list[dict[str, Any]]:
    """The attempts as ``deliveries --json`` shows them, each with its ``usage`` (or None)."""
    if not found:
        return []
    # A usage row is written just before its attempt's (the ack or release may retry a while).
    oldest = min(a.at for a in found) - SETTLE_S
    agents = {a.agent for a in found}
    rows = store.usage_since(oldest, agent=next(iter(agents)) if len(agents) == 1 else None)
    usage = {(u.delivery_id, u.attempt): u.to_dict() for u in rows}
    return [{**a.to_dict(), "usage": usage.get((a.delivery_id, a.attempt))} for a in found]


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def cost_lines(costs: dict[str, Any] | None) -> list[str]:
    """``status``'s lines: the day's cost per agent, and every agent over its budget."""
    if not costs:
        return []
    day = costs.get("day", {}).get("agents") or []
    lines = []
    if day:
        parts = [f"{t['name']} {_money(t['cost_usd'])} ({t['tokens_in'] + t['tokens_out']} tokens)"
                 for t in day]  # fmt: skip
        lines.append("cost, last day: " + ", ".join(parts))
    over = [b for b in costs.get("budgets") or () if b["over"]]
    lines.extend(f"over budget: {b['agent']} spent {_money(b['spent_usd'])} of "
                 f"{_money(b['limit_usd'])} today (UTC): paused" for b in over)  # fmt: skip
    return lines
