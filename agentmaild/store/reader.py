"""The dashboard's reader: read-only, bounded reads on a connection of its own, from one thread.

The store offers it (``open_reader(store)``); the dashboard never learns which backend it has.
The delivery loops never wait on a page: the reader has its own connection (SQLite: a WAL reader
that never blocks the daemon's writer, ``reader_sqlite``; PostgreSQL: a read-only session,
``reader_postgres``) and its own thread (``CapacityLimiter(1)``), not the store's. Every query is
bounded and written once (``sql/reader.sql``, with ``@postgres`` overrides where the dialects
differ). The producer makes ONE call per tick (``tick``): the change mark, then only the parts
that are due and changed, all on the reader's thread — one thread hop, not one per query.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from agentmaild.errors import StoreError
from agentmaild.store import reader_costs

T = TypeVar("T")
TIMELINE_ROWS = 60
THREADS = 50
THREAD_WINDOW = 2000  # threads are listed from the newest this many messages
DEAD_ROWS = 200
SPARK_MINUTES = 60
SPARK_CACHE_S = 10.0  # per-minute buckets: recomputed at most this often per agent
Spark = list[tuple[int, float | None, int]]


SEARCH_TERMS = 12
_TERM = re.compile(r'(-?)"([^"]*)"?|(-?)([^\s"]+)')
_WORDY = re.compile(r"\w")


@dataclass(frozen=True, slots=True)
class Term:
    """One term of a search: a word or "phrase", ``-`` to exclude it, ``or`` joining it to the
    one before (the web-search grammar both readers take: every positive term must match)."""

    text: str
    exclude: bool = False
    either: bool = False  # "a or b": this term is an alternative to the previous one


def search_terms(text: str) -> list[Term]:
    """The terms of a search box's text; [] when nothing could match (no positive term)."""
    terms: list[Term] = []
    either = False
    for m in _TERM.finditer(text):
        quoted = m.group(4) is None
        neg, word = (m.group(1), m.group(2)) if quoted else (m.group(3), m.group(4))
        word = word.strip()
        if not _WORDY.search(word):
            continue  # nothing a full-text index keeps (punctuation alone)
        if not quoted and not neg and word.lower() == "or" and terms and not terms[-1].exclude:
            either = True
            continue
        if word:
            terms.append(Term(word, exclude=bool(neg), either=either and not neg))
        either = False
    terms = terms[:SEARCH_TERMS]
    return terms if any(not t.exclude for t in terms) else []


class Reader:
    """Named reads for the pages and the producer; ``await reader.call(fn, …)`` off the loop.

    A store's reader supplies ``rows`` (a named query of ``sql/reader.sql`` → dicts), ``search``
    and ``close``; the rest is shared. A failed read raises ``errors`` (then it is closed, and
    reopened on the next call)."""

    search_window: int | None = None  # newest messages searched (None: all of them)
    errors: tuple[type[Exception], ...] = (StoreError,)

    def __init__(self) -> None:
        self._limiter = anyio.CapacityLimiter(1)
        self._sparks: dict[str, tuple[float, Spark]] = {}

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(partial(fn, *args), limiter=self._limiter)

    def rows(self, name: str, **params: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def mark(self) -> object:
        """Changes whenever anything was committed (the store's change mark, ``store.marks``)."""
        raise NotImplementedError

    def search(self, text: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # -- the producer's one call per tick ---------------------------------------------------
    def tick(self, seen: dict[str, object]) -> tuple[object, dict[str, Any]]:
        """The change mark, and each due part (``team``, ``dead``, ``timeline:<agent>``) whose
        last-seen mark differs from it, read now; ``seen`` maps a due part to its mark."""
        mark = self.mark()
        out: dict[str, Any] = {}
        for part, last in seen.items():
            if last == mark:
                continue
            if part == "team":
                out[part] = self.team()
            elif part == "dead":
                out[part] = self.dead()
            elif part.startswith("timeline:"):
                out[part] = self.timeline(part.partition(":")[2] or None)
        return mark, out

    # -- team ---------------------------------------------------------------------------
    def team(self) -> list[dict[str, Any]]:
        unread = {r["to_agent"]: r["n"] for r in self.rows("unread")}
        spent = {r["name"]: r for r in reader_costs.day(self.rows, "usage_agents")}
        out = []
        for a in self.rows("agents"):
            deliveries = self.rows("agent_deliveries", agent=a["name"])
            last = self.rows("last_attempt", agent=a["name"])
            out.append({
                "name": a["name"], "channel": a["channel"], "state": a["state"],
                "host": a["host"], "turn_state": a["turn_state"],
                "unread": unread.get(a["name"], 0),
                "claimed": [d for d in deliveries if d["state"] == "claimed"],
                "dead": sum(1 for d in deliveries if d["state"] == "dead"),
                "last": last[0] if last else None, "cost": spent.get(a["name"]),
            })  # fmt: skip
        return out

    # -- what the team costs (``reader_costs``) -------------------------------------------
    def costs(self, now: float | None = None) -> dict[str, Any]:
        return reader_costs.costs(self.rows, now)

    def over_budget(self, now: float | None = None) -> list[dict[str, Any]]:
        return reader_costs.over_budget(self.rows, now)

    # -- timeline -----------------------------------------------------------------------
    def timeline(self, agent: str | None, limit: int = TIMELINE_ROWS) -> dict[str, Any]:
        if agent:
            rows = self.rows("attempts_agent", agent=agent, limit=limit)
            names = [agent]
        else:
            rows = self.rows("attempts_all", limit=limit)
            names = [r["name"] for r in self.rows("agents")]
        flying = [r for n in names for r in self.rows("in_flight", agent=n)]
        attempts = [{**r, "n_messages": len(_ids(r["message_ids"]))} for r in rows]
        return {"attempts": attempts, "in_flight": flying,
                "sparks": {n: self.cached_spark(n) for n in names[:50]}}  # fmt: skip

    def cached_spark(self, agent: str) -> Spark:
        now = time.monotonic()
        hit = self._sparks.get(agent)
        if hit is None or now - hit[0] >= SPARK_CACHE_S:
            if len(self._sparks) > 500:
                self._sparks.clear()
            hit = self._sparks[agent] = (now, self.spark(agent))
        return hit[1]

    def spark(self, agent: str, now: float | None = None) -> Spark:
        """Per minute of the last hour, oldest first: (attempts, mean duration_s, failures)."""
        start = (time.time() if now is None else now) - SPARK_MINUTES * 60
        buckets: Spark = [(0, None, 0)] * SPARK_MINUTES
        for r in self.rows("spark", start=start, agent=agent):
            minute = int(r["minute"])
            if 0 <= minute < SPARK_MINUTES:
                mean = r["mean"]
                buckets[minute] = (int(r["n"]), None if mean is None else float(mean),
                                   int(r["failed"] or 0))  # fmt: skip
        return buckets

    # -- mail ---------------------------------------------------------------------------
    def threads(self) -> list[dict[str, Any]]:
        spent = {r["thread"]: r for r in reader_costs.day(self.rows, "usage_threads")}
        return [{**t, "cost": spent.get(t["thread"])}
                for t in self.rows("threads", window=THREAD_WINDOW, limit=THREADS)]  # fmt: skip

    def thread(self, thread_id: str) -> list[dict[str, Any]]:
        out = []
        for message in self.rows("thread", thread=thread_id):
            message["payload_pretty"] = _pretty(message.get("payload"))
            message["delivery"] = self.delivery(message["delivery_id"])
            out.append(message)
        return out

    def delivery(self, delivery_id: str | None) -> dict[str, Any] | None:
        if not delivery_id:
            return None
        rows = self.rows("delivery", id=delivery_id)
        if not rows:
            return None
        return {**rows[0], "history": self.rows("delivery_attempts", id=delivery_id)}

    # -- dead letters -------------------------------------------------------------------
    def dead(self) -> list[dict[str, Any]]:
        return [{**r, "messages": self.rows("delivery_messages", id=r["id"])}
                for r in self.rows("dead", limit=DEAD_ROWS)]  # fmt: skip


def _ids(value: Any) -> list[Any]:
    return json.loads(value) if isinstance(value, str | bytes) else list(value or ())


def _pretty(payload: str | None) -> str | None:
    if not payload:
        return None
    try:
        return json.dumps(json.loads(payload), indent=2, ensure_ascii=False)
    except ValueError:
        return payload


def snippet_parts(snippet: str) -> list[tuple[str, bool]]:
    """A search snippet with \\x01…\\x02 around hits → (text, is_hit) pieces, escaped apart."""
    parts: list[tuple[str, bool]] = []
    for i, chunk in enumerate(snippet.split("\x01")):
        hit, _, rest = chunk.partition("\x02") if i else ("", "", chunk)
        if hit:
            parts.append((hit, True))
        if rest:
            parts.append((rest, False))
    return parts
