"""What the team costs, in the store: one ``am_usage`` row per attempt whose turn reported usage
(tokens, and the price where the CLI says it), and the operator's raise or reset of an agent's
daily budget (``am_budgets``). Written once over the connector (``StoreUsage``); the in-memory
fake keeps the same in lists (``MemoryUsage``). What is over budget is judged by
``rules.budget``, never here.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

from agentmaild.store.connector import OverConnector, Tx

USAGE_ROWS = 2000  # a history listing's usage rows are read up to this many


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRecord:
    """What one delivery attempt cost: written beside its history row (same id and attempt)."""

    delivery_id: str
    attempt: int
    agent: str
    thread_id: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    at: float

    def to_dict(self) -> dict[str, Any]:
        return {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "cost_usd": self.cost_usd, "thread_id": self.thread_id}  # fmt: skip


@dataclass(frozen=True, slots=True)
class BudgetMark:
    """The operator's word on an agent's budget for one UTC day (``agents budget``)."""

    agent: str
    day: str  # YYYY-MM-DD (UTC)
    raised_usd: float = 0.0
    reset_at: float | None = None


def _record(row: Any) -> UsageRecord:
    return UsageRecord(
        delivery_id=row["delivery_id"], attempt=int(row["attempt"]), agent=row["agent"],
        thread_id=row["thread_id"], tokens_in=int(row["tokens_in"]),
        tokens_out=int(row["tokens_out"]),
        cost_usd=None if row["cost_usd"] is None else float(row["cost_usd"]), at=float(row["at"]),
    )  # fmt: skip


def _totals(row: Any) -> dict[str, Any]:
    cost = row["cost_usd"]
    return {"name": row["name"], "turns": int(row["turns"]), "tokens_in": int(row["tokens_in"]),
            "tokens_out": int(row["tokens_out"]),
            "cost_usd": None if cost is None else round(float(cost), 6)}  # fmt: skip


class StoreUsage(OverConnector):
    """The usage and budget operations of every SQL store."""

    def record_usage(self, record: UsageRecord) -> None:
        self.db.write(lambda tx: tx.execute("usage_insert", asdict(record)))

    def usage_since(
        self, since: float, *, agent: str | None = None, limit: int = USAGE_ROWS
    ) -> list[UsageRecord]:
        """Usage rows that ended at ``since`` or later, newest first."""
        params = {"since": since, "agent": agent, "limit": limit}
        return self.db.read(lambda tx: [_record(r) for r in tx.fetch_all("usage_since", params)])

    def usage_by_agent(self, since: float) -> list[dict[str, Any]]:
        """Per agent since ``since``: turns with usage, tokens in and out, cost (None: unpriced)."""
        rows = self.db.read(lambda tx: tx.fetch_all("usage_by_agent", {"since": since}))
        return [_totals(r) for r in rows]

    def usage_by_thread(self, since: float, limit: int = 50) -> list[dict[str, Any]]:
        """Per thread since ``since`` (the costliest first): as ``usage_by_agent``."""
        params = {"since": since, "limit": limit}
        rows = self.db.read(lambda tx: tx.fetch_all("usage_by_thread", params))
        return [_totals(r) for r in rows]

    def cost_since(self, agent: str, since: float) -> float:
        row = self.db.read(
            lambda tx: tx.fetch_one("usage_agent_cost", {"agent": agent, "since": since})
        )
        return float(row["cost_usd"]) if row is not None and row["cost_usd"] is not None else 0.0

    def budget_mark(self, agent: str) -> BudgetMark | None:
        row = self.db.read(lambda tx: tx.fetch_one("budget_get", {"agent": agent}))
        if row is None:
            return None
        reset = row["reset_at"]
        return BudgetMark(row["agent"], row["day"], float(row["raised_usd"]),
                          None if reset is None else float(reset))  # fmt: skip

    def put_budget_mark(self, mark: BudgetMark, *, now: float) -> None:
        def run(tx: Tx) -> None:
            tx.execute("budget_put", {**asdict(mark), "at": now})

        self.db.write(run)


class MemoryUsage:
    """The same operations over lists, for the in-memory fake (its own lock)."""

    def _usage_state(self) -> tuple[threading.Lock, list[UsageRecord], dict[str, BudgetMark]]:
        state: tuple[threading.Lock, list[UsageRecord], dict[str, BudgetMark]] | None
        state = self.__dict__.get("_usage")
        if state is None:
            state = self.__dict__.setdefault("_usage", (threading.Lock(), [], {}))
        return state

    def record_usage(self, record: UsageRecord) -> None:
        lock, rows, _ = self._usage_state()
        with lock:
            rows.append(record)

    def usage_since(
        self, since: float, *, agent: str | None = None, limit: int = USAGE_ROWS
    ) -> list[UsageRecord]:
        lock, rows, _ = self._usage_state()
        with lock:
            found = [r for r in rows if r.at >= since and agent in (None, r.agent)]
        return sorted(found, key=lambda r: -r.at)[:limit]

    def usage_by_agent(self, since: float) -> list[dict[str, Any]]:
        return self._totals(since, lambda r: r.agent)

    def usage_by_thread(self, since: float, limit: int = 50) -> list[dict[str, Any]]:
        found = self._totals(since, lambda r: r.thread_id)
        return sorted(found, key=lambda t: -(t["cost_usd"] or 0.0))[:limit]

    def _totals(self, since: float, key: Any) -> list[dict[str, Any]]:
        per: dict[str, dict[str, Any]] = {}
        for r in self.usage_since(since, limit=len(self._usage_state()[1])):
            if key(r) is None:
                continue
            t = per.setdefault(key(r), {"name": key(r), "turns": 0, "tokens_in": 0,
                                        "tokens_out": 0, "cost_usd": None})  # fmt: skip
            t["turns"] += 1
            t["tokens_in"] += r.tokens_in
            t["tokens_out"] += r.tokens_out
            if r.cost_usd is not None:
                t["cost_usd"] = round((t["cost_usd"] or 0.0) + r.cost_usd, 6)
        return [per[k] for k in sorted(per)]

    def cost_since(self, agent: str, since: float) -> float:
        rows = self.usage_since(since, agent=agent, limit=len(self._usage_state()[1]))
        return sum(r.cost_usd or 0.0 for r in rows)

    def budget_mark(self, agent: str) -> BudgetMark | None:
        lock, _, marks = self._usage_state()
        with lock:
            return marks.get(agent)

    def put_budget_mark(self, mark: BudgetMark, *, now: float) -> None:
        lock, _, marks = self._usage_state()
        with lock:
            marks[mark.agent] = mark
