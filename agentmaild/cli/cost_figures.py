"""What the team costs, as the CLI shows it: the figures (``rules.costs``), the usage beside each
attempt of ``deliveries --json``, the lines ``status`` prints. Without typer (``status`` runs
without it); ``cli.costs`` re-exports it beside the ``agents budget`` command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentmaild.rules.costs import DAY_S as DAY_S
from agentmaild.rules.costs import HOUR_S as HOUR_S
from agentmaild.rules.costs import THREADS as THREADS
from agentmaild.rules.costs import figures as figures

if TYPE_CHECKING:
    from agentmaild.models import Attempt

SETTLE_S = 900.0


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
