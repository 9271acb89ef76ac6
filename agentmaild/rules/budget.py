"""An agent's daily budget, judged once: what it spent this UTC day against what it may spend.

The budget is the agent's own (``agents add/set --budget-usd``: ``settings.budget_usd``), else
the team's ``[limits] agent_budget_usd`` (a team rule the daemon writes to the store); 0 or unset
is no budget. Spending is the sum of ``cost_usd`` of the agent's attempts since the start of the
UTC day (``store.usage``): turns whose CLI reports no price count nothing. The operator's word
for the day (``agents budget NAME --raise USD | --reset``, a ``BudgetMark``) adds to the budget,
or starts the count again from the reset. An agent that has spent its budget (or more) is over
it: its delivery loop claims nothing (``delivery.budget_gate``) until a raise, a reset or the
next UTC day. ``judge`` is the rule; the daemon, the CLI and the dashboard's reader all ask it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentmaild.store.usage import BudgetMark

DAY_S = 86400.0
SETTING = "budget_usd"  # its key in an agent's settings
TEAM_KEY = "agent_budget_usd"  # its key in the team rules ([limits])


def utc_day(now: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(now))


def day_start(now: float) -> float:
    return now - now % DAY_S


def budget_of(settings: Mapping[str, Any], default_usd: float) -> float | None:
    """The agent's daily budget in USD: its own, else the team's; None when it has none."""
    own = settings.get(SETTING)
    if isinstance(own, int | float) and not isinstance(own, bool) and own > 0:
        return float(own)
    return float(default_usd) if default_usd > 0 else None


@dataclass(frozen=True, slots=True)
class BudgetState:
    """One agent's spending today against its budget (``budget_usd`` None: no budget)."""

    agent: str
    budget_usd: float | None
    raised_usd: float
    spent_usd: float
    since: float  # unix seconds: spending is counted from here (the UTC day's start or a reset)

    @property
    def limit_usd(self) -> float | None:
        return None if self.budget_usd is None else self.budget_usd + self.raised_usd

    @property
    def over(self) -> bool:
        limit = self.limit_usd
        return limit is not None and self.spent_usd >= limit

    def reason(self) -> str:
        """The one line `status` shows for an agent over its budget."""
        return (f"over budget: ${self.spent_usd:.4f} of ${self.limit_usd or 0:.2f} today (UTC); "
                f"`agentmaild agents budget {self.agent} --raise USD` or --reset")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "budget_usd": self.budget_usd,
                "raised_usd": self.raised_usd, "limit_usd": self.limit_usd,
                "spent_usd": round(self.spent_usd, 6), "over": self.over,
                "since": self.since}  # fmt: skip


def judge(
    agent: str,
    settings: Mapping[str, Any],
    default_usd: float,
    mark: BudgetMark | None,
    cost_since: Callable[[float], float],
    now: float,
) -> BudgetState:
    """The rule: ``cost_since(t)`` is what the agent spent from ``t`` on."""
    since, raised = day_start(now), 0.0
    if mark is not None and mark.day == utc_day(now):
        raised = mark.raised_usd
        if mark.reset_at is not None:
            since = max(since, mark.reset_at)
    return BudgetState(agent, budget_of(settings, default_usd), raised, cost_since(since), since)


def team_default(rules: Mapping[str, Any]) -> float:
    value = rules.get(TEAM_KEY)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def budget_status(store: Any, name: str, now: float) -> BudgetState | None:
    """``judge`` over a store (any ``MailStore``); None when there is no such agent."""
    agent = store.get_agent(name)
    if agent is None:
        return None
    return judge(agent.name, agent.settings, team_default(store.team_rules()),
                 store.budget_mark(agent.name), lambda t: store.cost_since(agent.name, t),
                 now)  # fmt: skip


def raise_budget(store: Any, name: str, usd: float, now: float) -> BudgetState | None:
    """Add ``usd`` to the agent's budget for today (a raise already made today adds up)."""
    mark = store.budget_mark(name)
    today = utc_day(now)
    kept = mark if mark is not None and mark.day == today else BudgetMark(name, today)
    store.put_budget_mark(BudgetMark(name, today, kept.raised_usd + usd, kept.reset_at), now=now)
    return budget_status(store, name, now)


def reset_budget(store: Any, name: str, now: float) -> BudgetState | None:
    """Count today's spending again from now (and forget today's raise)."""
    store.put_budget_mark(BudgetMark(name, utc_day(now), 0.0, now), now=now)
    return budget_status(store, name, now)
