"""Work-queue membership and status on SQLite (queue claims live in sqlite_deliveries)."""

from __future__ import annotations

import sqlite3

from agentmaild.errors import NotFound
from agentmaild.models import QueueInfo
from agentmaild.store.queries import Q
from agentmaild.store.sqlite_tx import SqliteTransactions


class SqliteQueues(SqliteTransactions):
    """The ``MailStore`` work-queue operations on SQLite."""

    def join_queue(self, queue: str, agent: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            if conn.execute(Q["agent_get"], {"name": agent}).fetchone() is None:
                raise NotFound(f"no agent named {agent!r}")
            conn.execute(Q["queue_join"], {"queue": queue, "agent": agent})

        self._write(run)

    def leave_queue(self, queue: str, agent: str) -> bool:
        params = {"queue": queue, "agent": agent}
        return self._write(lambda c: c.execute(Q["queue_leave"], params).rowcount == 1)

    def queue_members(self, queue: str) -> list[str]:
        return [str(r[0]) for r in self._read(Q["queue_members"], {"queue": queue})]

    def queues(self) -> list[QueueInfo]:
        def run(conn: sqlite3.Connection) -> list[QueueInfo]:
            members: dict[str, list[str]] = {}
            for queue, agent in conn.execute(Q["queue_members_all"]):
                members.setdefault(queue, []).append(agent)
            depths = {q: int(n) for q, n in conn.execute(Q["queue_depths"])}
            held: dict[str, list[tuple[str, str, int]]] = {}
            for queue, agent, delivery_id, attempts in conn.execute(Q["queue_held"]):
                held.setdefault(queue, []).append((agent, delivery_id, int(attempts)))
            return [
                QueueInfo(
                    name=name,
                    members=tuple(members.get(name, ())),
                    depth=depths.get(name, 0),
                    held=tuple(held.get(name, ())),
                )
                for name in sorted(set(members) | set(depths) | set(held))
            ]

        return self._read_with(run)
