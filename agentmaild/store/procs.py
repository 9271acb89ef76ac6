"""The agent process journal, written once over the connector: record, forget, list."""

from __future__ import annotations

import dataclasses

from agentmaild.store.connector import OverConnector, Row
from agentmaild.store.records import AgentProc


def _proc(row: Row) -> AgentProc:
    return AgentProc(
        pid=int(row["pid"]),
        start_time=str(row["start_time"]),
        pgid=int(row["pgid"]),
        agent=str(row["agent"]),
        delivery_id=row["delivery_id"],
        daemon_pid=int(row["daemon_pid"]),
        started_at=float(row["started_at"]),
    )


class StoreProcs(OverConnector):
    """The ``MailStore`` agent process operations (``am_agent_procs``), for every SQL store."""

    def record_proc(self, proc: AgentProc) -> None:
        params = dataclasses.asdict(proc)
        self.db.write(lambda tx: tx.execute("proc_record", params))

    def forget_proc(self, pid: int, start_time: str) -> bool:
        params = {"pid": pid, "start_time": start_time}
        return self.db.write(lambda tx: tx.execute("proc_forget", params)) > 0

    def list_procs(self, agent: str | None = None) -> list[AgentProc]:
        return [_proc(r) for r in self.db.fetch_all("proc_list", {"agent": agent})]
