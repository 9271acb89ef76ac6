"""Needs you: what waits for the operator, oldest first, each with the action that resolves it.

The list is built from ``SOURCES``: small functions of a ``Look`` (the dashboard's reader, on its
own thread, and the supervisor's snapshot taken on the event loop) that each return ``Item``s. A
new source (a budget, an interrupt) is one function and one line in ``SOURCES``; the template
``_needs.html`` shows an item by its ``kind`` with that kind's buttons.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentmaild.mail.vocab import OPERATOR
from agentmaild.store.reader import Reader

LIMIT = 100  # items per source: the page is for acting on, not for an archive


@dataclass(frozen=True, slots=True)
class Item:
    kind: str  # question | escalated | dead | stuck | loop | budget
    since: float  # unix seconds: when it started waiting
    key: str  # unique on the page (the row's id)
    title: str
    agent: str | None = None
    ref: str = ""  # what its action acts on: a message, a delivery or a thread id
    thread: str | None = None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Look:
    reader: Reader
    loops: dict[str, dict[str, Any]]  # Supervisor.snapshot()
    now: float


def _at(stamp: Any) -> float:
    if isinstance(stamp, int | float):
        return float(stamp)
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def questions(look: Look) -> list[Item]:
    """Questions to the operator with no reply yet; the asker may be blocked on ``ask``."""
    rows = look.reader.rows("needs_questions", operator=OPERATOR, limit=LIMIT)
    return [Item("question", _at(r["created_at"]), f"q-{r['id']}", r["subject"],
                 agent=r["from_agent"], ref=r["id"], thread=r["thread"], detail=r["body"],
                 extra={"priority": r["priority"]})
            for r in rows]  # fmt: skip


def escalated(look: Look) -> list[Item]:
    """Mail the long-unread rule escalated and that is still unread (a question to the operator
    is listed once, as a question)."""
    rows = [r for r in look.reader.rows("needs_escalated", limit=LIMIT)
            if not (r["to_agent"] == OPERATOR and r["type"] == "question")]  # fmt: skip
    return [Item("escalated", _at(r["created_at"]), f"e-{r['id']}", r["subject"],
                 agent=r["to_agent"], ref=r["id"], thread=r["thread"],
                 extra={"from": r["from_agent"], "priority": r["priority"]})
            for r in rows]  # fmt: skip


def dead_letters(look: Look) -> list[Item]:
    """Batches that ran out of attempts (``retry`` re-queues them)."""
    return [Item("dead", _at(d["updated_at"]), f"d-{d['id']}",
                 ", ".join(m["subject"] for m in d["messages"]) or d["id"], agent=d["agent"],
                 ref=d["id"], thread=d["messages"][0]["thread"] if d["messages"] else None,
                 detail=d["last_error"] or "", extra={"attempts": d["attempts"]})
            for d in look.reader.dead()[:LIMIT]]  # fmt: skip


def stuck(look: Look) -> list[Item]:
    """Agents busy in one turn past ``daemon.busy_warn_after_s``."""
    return [Item("stuck", look.now - float(row.get("busy_for_s") or 0), f"s-{name}",
                 f"{name} has been busy in one turn", agent=name,
                 ref=row.get("in_flight_delivery") or "", detail=row.get("busy_reason") or "")
            for name, row in sorted(look.loops.items()) if row.get("stuck")]  # fmt: skip


def loop_stops(look: Look) -> list[Item]:
    """Threads the loop guard holds for a pair that mailed past ``pingpong_max``."""
    return [Item("loop", _at(r["held_at"]), f"l-{r['thread_id']}-{r['pair']}",
                 f"{r['pair'].replace('|', ' ⇄ ')}: {r['messages']} messages on one thread",
                 ref=r["thread_id"], thread=r["thread_id"],
                 extra={"pair": r["pair"].split("|")})
            for r in look.reader.rows("holds", limit=LIMIT)]  # fmt: skip


def over_budget(look: Look) -> list[Item]:
    """Agents over their daily budget: no mail reaches them until it is raised or reset."""
    return [Item("budget", b["since"], f"b-{b['agent']}", f"{b['agent']} is over its daily budget",
                 agent=b["agent"], ref=b["agent"],
                 detail=f"${b['spent_usd']:.4f} spent of ${b['limit_usd'] or 0:.2f} today (UTC)")
            for b in look.reader.over_budget(look.now)[:LIMIT]]  # fmt: skip


SOURCES: tuple[Callable[[Look], list[Item]], ...] = (
    questions,
    escalated,
    dead_letters,
    stuck,
    loop_stops,
    over_budget,
)


def collect(reader: Reader, loops: dict[str, dict[str, Any]]) -> list[Item]:
    """Every source's items, oldest first (on the reader's thread: one hop for all of them)."""
    look = Look(reader, loops, time.time())
    items = [item for source in SOURCES for item in source(look)]
    return sorted(items, key=lambda i: (i.since, i.key))


def stuck_key(loops: dict[str, dict[str, Any]]) -> tuple[tuple[str, Any], ...]:
    """What of the snapshot the list depends on (the stuck agents and their turns)."""
    return tuple((n, r.get("in_flight_delivery")) for n, r in sorted(loops.items())
                 if r.get("stuck"))  # fmt: skip
