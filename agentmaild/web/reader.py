"""The dashboard's reads: its own read-only SQLite connection, used from one worker thread.

The delivery loops never wait on a page: WAL readers do not block the daemon's writer, and this
connection has its own thread (``CapacityLimiter(1)``), not the store's. Every query is bounded
(``queries.sql``). ``data_version`` tells the producer whether anything was committed since it
last looked.
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

from agentmaild.store.queries import parse_named as parse_queries
from agentmaild.store.sqlite_open import connect_readonly
from agentmaild.web.search import SearchIndex

T = TypeVar("T")
Q = parse_queries((Path(__file__).parent / "queries.sql").read_text(encoding="utf-8"))
TIMELINE_ROWS = 60
THREADS = 50
THREAD_WINDOW = 2000  # threads are listed from the newest this many messages
DEAD_ROWS = 200
SPARK_MINUTES = 60
SPARK_CACHE_S = 10.0  # per-minute buckets: recomputed at most this often per agent


def _rows(conn: sqlite3.Connection, name: str, *args: Any) -> list[sqlite3.Row]:
    return list(conn.execute(Q[name], args))


class Reader:
    """Named reads for the pages and the producer; ``await reader.call(fn, …)`` off the loop."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._conn: sqlite3.Connection | None = None
        self._limiter = anyio.CapacityLimiter(1)
        self.search_index = SearchIndex(Q)
        self._sparks: dict[str, tuple[float, list[tuple[int, float | None, int]]]] = {}

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(partial(fn, *args), limiter=self._limiter)

    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            # The daemon migrated the file before serving: nothing to upgrade here.
            conn = connect_readonly(self.db, lambda: None)
            conn.row_factory = sqlite3.Row
            self._conn = conn
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def data_version(self) -> int:
        return int(self.conn().execute("PRAGMA data_version").fetchone()[0])

    # -- team ---------------------------------------------------------------------------
    def team(self) -> list[dict[str, Any]]:
        conn = self.conn()
        unread = {r[0]: r[1] for r in _rows(conn, "unread")}
        out = []
        for a in _rows(conn, "agents"):
            deliveries = _rows(conn, "agent_deliveries", a["name"])
            last = _rows(conn, "last_attempt", a["name"])
            out.append({
                "name": a["name"], "channel": a["channel"], "state": a["state"],
                "turn_state": a["turn_state"], "unread": unread.get(a["name"], 0),
                "claimed": [dict(d) for d in deliveries if d["state"] == "claimed"],
                "dead": sum(1 for d in deliveries if d["state"] == "dead"),
                "last": dict(last[0]) if last else None,
            })  # fmt: skip
        return out

    # -- timeline -----------------------------------------------------------------------
    def timeline(self, agent: str | None, limit: int = TIMELINE_ROWS) -> dict[str, Any]:
        conn = self.conn()
        if agent:
            rows = _rows(conn, "attempts_agent", agent, limit)
            names = [agent]
        else:
            rows = _rows(conn, "attempts_all", limit)
            names = [r["name"] for r in _rows(conn, "agents")]
        flying = [dict(r) for n in names for r in _rows(conn, "in_flight", n)]
        attempts = [{**dict(r), "n_messages": len(json.loads(r["message_ids"]))} for r in rows]
        return {"attempts": attempts, "in_flight": flying,
                "sparks": {n: self.cached_spark(n) for n in names[:50]}}  # fmt: skip

    def cached_spark(self, agent: str) -> list[tuple[int, float | None, int]]:
        now = time.monotonic()
        hit = self._sparks.get(agent)
        if hit is None or now - hit[0] >= SPARK_CACHE_S:
            if len(self._sparks) > 500:
                self._sparks.clear()
            hit = self._sparks[agent] = (now, self.spark(agent))
        return hit[1]

    def spark(self, agent: str, now: float | None = None) -> list[tuple[int, float | None, int]]:
        """Per minute of the last hour, oldest first: (attempts, mean duration_s, failures)."""
        start = (time.time() if now is None else now) - SPARK_MINUTES * 60
        buckets: list[tuple[int, float | None, int]] = [(0, None, 0)] * SPARK_MINUTES
        for minute, n, mean, failed in _rows(self.conn(), "spark", start, agent, start):
            if 0 <= minute < SPARK_MINUTES:
                buckets[minute] = (n, mean, failed or 0)
        return buckets

    # -- mail ---------------------------------------------------------------------------
    def threads(self) -> list[dict[str, Any]]:
        return [dict(r) for r in _rows(self.conn(), "threads", THREAD_WINDOW, THREADS)]

    def thread(self, thread_id: str) -> list[dict[str, Any]]:
        conn = self.conn()
        out = []
        for row in conn.execute(Q["thread"], {"t": thread_id}):
            message = dict(row)
            message["payload_pretty"] = _pretty(message.get("payload"))
            message["delivery"] = self.delivery(message["delivery_id"])
            out.append(message)
        return out

    def delivery(self, delivery_id: str | None) -> dict[str, Any] | None:
        if not delivery_id:
            return None
        conn = self.conn()
        rows = _rows(conn, "delivery", delivery_id)
        if not rows:
            return None
        return {**dict(rows[0]), "history": [dict(r) for r in
                                             _rows(conn, "delivery_attempts", delivery_id)]}

    def search(self, text: str) -> list[dict[str, Any]]:
        return self.search_index.search(self.conn(), text)

    # -- dead letters -------------------------------------------------------------------
    def dead(self) -> list[dict[str, Any]]:
        conn = self.conn()
        return [
            {**dict(r), "messages": [dict(m) for m in _rows(conn, "delivery_messages", r["id"])]}
            for r in _rows(conn, "dead", DEAD_ROWS)
        ]


def _pretty(payload: str | None) -> str | None:
    if not payload:
        return None
    try:
        return json.dumps(json.loads(payload), indent=2, ensure_ascii=False)
    except ValueError:
        return payload
