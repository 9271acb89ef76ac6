"""The agent process journal of the SQLite store: record, forget and list ``am_agent_procs``."""

from __future__ import annotations

import dataclasses
import sqlite3

from agentmaild.store.base import AgentProc
from agentmaild.store.queries import Q
from agentmaild.store.sqlite_tx import SqliteTransactions


def _proc(row: sqlite3.Row) -> AgentProc:
    return AgentProc(
        pid=int(row["pid"]),
        start_time=str(row["start_time"]),
        pgid=int(row["pgid"]),
        agent=str(row["agent"]),
        delivery_id=row["delivery_id"],
        daemon_pid=int(row["daemon_pid"]),
        started_at=float(row["started_at"]),
    )


class SqliteProcs(SqliteTransactions):
    """The ``MailStore`` agent process operations on SQLite."""

    def record_proc(self, proc: AgentProc) -> None:
        params = dataclasses.asdict(proc)
        self._write(lambda conn: conn.execute(Q["proc_record"], params))

    def forget_proc(self, pid: int, start_time: str) -> bool:
        params = {"pid": pid, "start_time": start_time}
        return bool(self._write(lambda conn: conn.execute(Q["proc_forget"], params).rowcount))

    def list_procs(self, agent: str | None = None) -> list[AgentProc]:
        return [_proc(r) for r in self._read(Q["proc_list"], {"agent": agent})]
