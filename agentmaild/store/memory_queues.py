"""Work-queue membership and status in the in-memory fake (queue claims: memory_deliveries)."""

from __future__ import annotations

from agentmaild.errors import NotFound
from agentmaild.models import QUEUE_PREFIX, QueueInfo
from agentmaild.store.memory_state import MemoryState, atomic


class MemoryQueues(MemoryState):
    """The ``MailStore`` work-queue operations over the fake's dicts."""

    @atomic
    def join_queue(self, queue: str, agent: str) -> None:
        if agent not in self._agents:
            raise NotFound(f"no agent named {agent!r}")
        self._queue_members.setdefault(queue, set()).add(agent)

    @atomic
    def leave_queue(self, queue: str, agent: str) -> bool:
        members = self._queue_members.get(queue, set())
        if agent not in members:
            return False
        members.discard(agent)
        if not members:
            del self._queue_members[queue]
        return True

    @atomic
    def queue_members(self, queue: str) -> list[str]:
        return sorted(self._queue_members.get(queue, ()))

    @atomic
    def queues(self) -> list[QueueInfo]:
        depth: dict[str, int] = {}
        for m in self._messages.values():
            if m.to_agent.startswith(QUEUE_PREFIX) and not m.read:
                if m.delivery_id is None or self._in_state(m, "pending"):
                    name = m.to_agent[len(QUEUE_PREFIX) :]
                    depth[name] = depth.get(name, 0) + 1
        held: dict[str, list[tuple[str, str, int]]] = {}
        for d in sorted(self._deliveries.values(), key=lambda d: (d.agent, d.id)):
            if d.state == "claimed" and d.queue is not None:
                held.setdefault(d.queue, []).append((d.agent, d.id, d.attempts))
        names = sorted(set(self._queue_members) | set(depth) | set(held))
        return [
            QueueInfo(
                name=n,
                members=tuple(sorted(self._queue_members.get(n, ()))),
                depth=depth.get(n, 0),
                held=tuple(held.get(n, ())),
            )
            for n in names
        ]
