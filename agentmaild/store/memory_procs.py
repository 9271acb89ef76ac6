"""The agent process journal of the in-memory fake: record, forget and list processes."""

from __future__ import annotations

from agentmaild.store.base import AgentProc
from agentmaild.store.memory_state import MemoryState, atomic


class MemoryProcs(MemoryState):
    """The ``MailStore`` agent process operations over a dict keyed like the table's primary key."""

    @atomic
    def record_proc(self, proc: AgentProc) -> None:
        self._procs[(proc.pid, proc.start_time)] = proc

    @atomic
    def forget_proc(self, pid: int, start_time: str) -> bool:
        return self._procs.pop((pid, start_time), None) is not None

    @atomic
    def list_procs(self, agent: str | None = None) -> list[AgentProc]:
        rows = [p for p in self._procs.values() if agent is None or p.agent == agent]
        return sorted(rows, key=lambda p: (p.started_at, p.pid))
