"""The dashboard's reads: its own read-only connection, used from one worker thread.

The delivery loops never wait on a page: the reader has its own connection (SQLite: a WAL
reader that never blocks the daemon's writer; PostgreSQL: ``pg_reader``) and its own thread
(``CapacityLimiter(1)``), not the store's. Every query is bounded (``queries.sql``). The
producer makes ONE call per tick (``tick``): the change mark, then only the parts that are due
and changed, all on the reader's thread — one thread hop, not one per query.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from agentmaild.store.marks import sqlite_mark
from agentmaild.store.queries import parse_named as parse_queries
from agentmaild.store.sqlite_open import connect_readonly
from agentmaild.web.search import WINDOW, SearchIndex

T = TypeVar("T")
Q = parse_queries((Path(__file__).parent / "queries.sql").read_text(encoding="utf-8"))
TIMELINE_ROWS = 60
THREADS = 50
THREAD_WINDOW = 2000  # threads are listed from the newest this many messages
DEAD_ROWS = 200
SPARK_MINUTES = 60
SPARK_CACHE_S = 10.0  # per-minute buckets: recomputed at most this often per agent
Spark = list[tuple[int, float | None, int]]


class Reader:
    """Named reads for the pages and the producer; ``await reader.call(fn, …)`` off the loop.

    A store's reader supplies ``rows`` (a named query → dicts), ``mark`` (changes whenever
    anything was committed), ``search`` and ``close``; the rest is shared."""

    search_window: int | None = WINDOW  # newest messages searched (None: all of them)
    errors: tuple[type[Exception], ...] = ()  # what a lost connection raises (then reopened)

    def __init__(self) -> None:
        self._limiter = anyio.CapacityLimiter(1)
        self._sparks: dict[str, tuple[float, Spark]] = {}

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(partial(fn, *args), limiter=self._limiter)

    def rows(self, name: str, *args: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def mark(self) -> object:
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
        out = []
        for a in self.rows("agents"):
            deliveries = self.rows("agent_deliveries", a["name"])
            last = self.rows("last_attempt", a["name"])
            out.append({
                "name": a["name"], "channel": a["channel"], "state": a["state"],
                "host": a["host"], "turn_state": a["turn_state"],
                "unread": unread.get(a["name"], 0),
                "claimed": [d for d in deliveries if d["state"] == "claimed"],
                "dead": sum(1 for d in deliveries if d["state"] == "dead"),
                "last": last[0] if last else None,
            })  # fmt: skip
        return out

    # -- timeline -----------------------------------------------------------------------
    def timeline(self, agent: str | None, limit: int = TIMELINE_ROWS) -> dict[str, Any]:
        if agent:
            rows = self.rows("attempts_agent", agent, limit)
            names = [agent]
        else:
            rows = self.rows("attempts_all", limit)
            names = [r["name"] for r in self.rows("agents")]
        flying = [r for n in names for r in self.rows("in_flight", n)]
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
        for r in self.rows("spark", start, agent, start):
            minute = int(r["minute"])
            if 0 <= minute < SPARK_MINUTES:
                mean = r["mean"]
                buckets[minute] = (int(r["n"]), None if mean is None else float(mean),
                                   int(r["failed"] or 0))  # fmt: skip
        return buckets

    # -- mail ---------------------------------------------------------------------------
    def threads(self) -> list[dict[str, Any]]:
        return self.rows("threads", THREAD_WINDOW, THREADS)

    def thread(self, thread_id: str) -> list[dict[str, Any]]:
        out = []
        for message in self.rows("thread", thread_id, thread_id):
            message["payload_pretty"] = _pretty(message.get("payload"))
            message["delivery"] = self.delivery(message["delivery_id"])
            out.append(message)
        return out

    def delivery(self, delivery_id: str | None) -> dict[str, Any] | None:
        if not delivery_id:
            return None
        rows = self.rows("delivery", delivery_id)
        if not rows:
            return None
        return {**rows[0], "history": self.rows("delivery_attempts", delivery_id)}

    # -- dead letters -------------------------------------------------------------------
    def dead(self) -> list[dict[str, Any]]:
        return [{**r, "messages": self.rows("delivery_messages", r["id"])}
                for r in self.rows("dead", DEAD_ROWS)]  # fmt: skip


class SqliteReader(Reader):
    """On a SQLite store: a read-only connection; ``PRAGMA data_version`` is the change mark."""

    errors = (sqlite3.Error,)

    def __init__(self, db: Path) -> None:
        super().__init__()
        self.db = db
        self._conn: sqlite3.Connection | None = None
        self.search_index = SearchIndex(Q)

    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            # The daemon migrated the file before serving: nothing to upgrade here.
            conn = connect_readonly(self.db, lambda: None)
            conn.row_factory = sqlite3.Row
            self._conn = conn
        return self._conn

    def rows(self, name: str, *args: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn().execute(Q[name], args)]

    def mark(self) -> object:
        return sqlite_mark(self.conn())

    def search(self, text: str) -> list[dict[str, Any]]:
        return self.search_index.search(self.conn(), text)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _ids(value: Any) -> list[Any]:
    return json.loads(value) if isinstance(value, str | bytes) else list(value or ())


def _pretty(payload: str | None) -> str | None:
    if not payload:
        return None
    try:
        return json.dumps(json.loads(payload), indent=2, ensure_ascii=False)
    except ValueError:
        return payload
