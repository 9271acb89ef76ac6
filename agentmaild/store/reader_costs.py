"""What the team costs, for the dashboard's reader: per agent and per thread over the last hour and
the last day, and the agents over their daily budget (judged by ``rules.budget``, as the daemon
and the CLI judge it). Each read is a named, bounded query of ``sql/reader.sql``, made through the
reader's ``rows``; the dashboard never learns the backend.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from agentmaild.rules.budget import budget_of, judge, team_default
from agentmaild.store.usage import BudgetMark

Rows = Callable[..., list[dict[str, Any]]]
WINDOWS = (("hour", 3600.0), ("day", 86400.0))
THREADS = 20


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    cost = row["cost_usd"]
    return {**row, "turns": int(row["turns"]), "tokens_in": int(row["tokens_in"]),
            "tokens_out": int(row["tokens_out"]),
            "cost_usd": None if cost is None else round(float(cost), 6)}  # fmt: skip


def costs(rows: Rows, now: float | None = None) -> dict[str, Any]:
    """``{"hour": {"agents": [...], "threads": [...]}, "day": {...}}``: turns, tokens in and
    out, and cost in USD (None when no turn was priced by its CLI)."""
    at = time.time() if now is None else now
    return {label: {"agents": [_plain(r) for r in rows("usage_agents", since=at - span)],
                    "threads": [_plain(r) for r in rows("usage_threads", since=at - span,
                                                         limit=THREADS)]}
            for label, span in WINDOWS}  # fmt: skip


def day(rows: Rows, query: str) -> list[dict[str, Any]]:
    """The last day's ``usage_agents`` or ``usage_threads`` (for the team and mail pages)."""
    return [_plain(r) for r in rows(query, since=time.time() - 86400.0, limit=200)]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def budgets(rows: Rows, now: float | None = None) -> list[dict[str, Any]]:
    """Every agent with a daily budget: what it spent today (UTC) against it, and ``over``."""
    at = time.time() if now is None else now
    found = rows("budget_rules")
    default = team_default(_json(found[0]["value"]) or {}) if found else 0.0
    out = []
    for a in rows("budget_agents"):
        settings = _json(a["settings"]) or {}
        if budget_of(settings, default) is None:
            continue
        mark = None if a["day"] is None else BudgetMark(
            a["name"], a["day"], float(a["raised_usd"] or 0), a["reset_at"])  # fmt: skip

        def spent(since: float, name: str = a["name"]) -> float:
            got = rows("usage_agent_cost", agent=name, since=since)
            return float(got[0]["cost_usd"] or 0) if got else 0.0

        out.append(judge(a["name"], settings, default, mark, spent, at).to_dict())
    return out


def over_budget(rows: Rows, now: float | None = None) -> list[dict[str, Any]]:
    """The agents over their daily budget (their delivery is paused): for "Needs you"."""
    return [b for b in budgets(rows, now) if b["over"]]
