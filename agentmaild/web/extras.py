"""The operator's live parts, published by the dashboard's one producer (``Dashboard``):

- ``needs`` (the Needs you list) and ``needs_n`` (the count every page's header shows): read
  again when the store's change mark or the stuck agents moved (or every ``NEEDS_REREAD_S``),
  rendered when due (its ages move); with only the count watched (every page but Needs you), at
  most every ``COUNT_EVERY_S``;
- ``agent:NAME`` (the agent page's status block): read again when the mark moved, rendered with
  the supervisor's snapshot when due;
- ``log:NAME`` (the agent page's log tail): the file is stat'ed on each tick and read only when it
  changed; a change is shown within ``LOG_EVERY_S`` plus a tick;
- ``graph`` (the team picture): read again when the mark moved, or every ``GRAPH_REREAD_S`` (the
  hour's window slides).

Each read is one call on the reader's thread; a fragment goes out only when its HTML changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentmaild.store import reader_costs
from agentmaild.web import graph, needs
from agentmaild.web.logtail import LogTails

if TYPE_CHECKING:
    from agentmaild.web.dashboard import Dashboard

LOG_EVERY_S = 0.4  # a log tail sent waits this long before the next
NEEDS_REREAD_S = 5.0
COUNT_EVERY_S = 2.0  # only the header's count watched: Needs you is read at most this often
GRAPH_REREAD_S = 30.0
PREFIXES = ("agent:", "log:")
TOPICS = ("needs", "needs_n", "graph")


def owns(topic: str) -> bool:
    return topic in TOPICS or topic.startswith(PREFIXES)


class Extras:
    def __init__(self, board: Dashboard) -> None:
        self.b = board
        self.logs = LogTails(board.daemon.store.sync.location.local_path)
        self._needs: list[needs.Item] = []
        self._needs_key: tuple[Any, ...] | None = None
        self._needs_at = -1e9
        self._graph: dict[str, Any] | None = None
        self._graph_key: tuple[Any, float] | None = None
        self._agents: dict[str, tuple[object, dict[str, Any] | None]] = {}

    async def needs_now(self) -> list[needs.Item]:
        loops = self.b.daemon.supervisor.snapshot()
        return await self.b.reader.call(needs.collect, self.b.reader, loops)

    async def publish(self, due: list[str], fresh: set[str], mark: object, now: float) -> None:
        """Each due part of ours: read if it moved, render, offer; the next look is scheduled."""
        b = self.b
        self.logs.forget({t.partition(":")[2] for t in b.hub.topics() if t.startswith("log:")})
        for name in [n for n in self._agents if f"agent:{n}" not in b.hub.topics()]:
            del self._agents[name]
        if "graph" in fresh:
            self._graph_key = None
        for topic in due:  # each returns whether it read or sent: then it rests LIVE_EVERY_S
            if topic in ("needs", "needs_n"):
                worked = await self._publish_needs(topic, mark, now)
            elif topic == "graph":
                worked = await self._publish_graph(mark, now)
            elif topic.startswith("agent:"):
                worked = await self._publish_agent(topic.partition(":")[2], mark)
            else:  # a log is only stat'ed until it changes
                worked = await self._publish_log(topic.partition(":")[2], topic in fresh)
            if worked:
                b.schedule(topic, now, LOG_EVERY_S if topic.startswith("log:") else None)

    async def _publish_needs(self, topic: str, mark: object, now: float) -> bool:
        loops = self.b.daemon.supervisor.snapshot()
        key = (mark, needs.stuck_key(loops))
        waited = now - self._needs_at
        rest = 0.0 if "needs" in self.b.hub.topics() else COUNT_EVERY_S
        if (key != self._needs_key and waited >= rest) or waited >= NEEDS_REREAD_S:
            self._needs = await self.b.reader.call(needs.collect, self.b.reader, loops)
            self._needs_key, self._needs_at = key, now
        read = self._needs_at == now  # by this look (for this topic or its sibling)
        if topic == "needs_n":
            html = self.b.render("_needs_n.html", needs_n=len(self._needs))
        else:
            html = await self.b.render_sliced("_needs.html", items=self._needs)
        return self.b.offer(topic, html) or read or topic == "needs_n"  # (a cheap look)

    async def _publish_graph(self, mark: object, now: float) -> bool:
        kept = self._graph_key
        if kept is not None and kept[0] == mark and now - kept[1] < GRAPH_REREAD_S:
            return False  # nothing new to draw
        self._graph = await self.b.reader.call(graph.read, self.b.reader)
        self._graph_key = (mark, now)
        self.b.offer("graph", self.b.render("_graph.html", **self._graph))
        return True  # read: rests LIVE_EVERY_S

    async def agent_data(self, name: str) -> dict[str, Any] | None:
        return await self.b.reader.call(read_agent, self.b.reader, name)

    async def _publish_agent(self, name: str, mark: object) -> bool:
        kept = self._agents.get(name)
        read = kept is None or kept[0] != mark
        if read:
            kept = self._agents[name] = (mark, await self.agent_data(name))
        agent = kept[1] if kept is not None else None
        if agent is None:
            return read
        loop = self.b.daemon.supervisor.snapshot().get(name)
        html = self.b.render("_agent.html", a=agent, loop=loop)
        return self.b.offer(f"agent:{name}", html) or read

    async def _publish_log(self, name: str, fresh: bool) -> bool:
        found = self.logs.changed(name, fresh)
        if found is None:
            return False
        lines, exists = found
        html = self.b.render("_log.html", lines=lines, exists=exists, path=self.logs.path(name))
        return self.b.offer(f"log:{name}", html) or fresh


def read_agent(reader: Any, name: str) -> dict[str, Any] | None:
    """One agent's row, its claimed and dead batches (on the reader's thread)."""
    rows = reader.rows("agent", agent=name)
    if not rows:
        return None
    deliveries = reader.rows("agent_deliveries", agent=name)
    spent = [r for r in reader_costs.day(reader.rows, "usage_agents") if r["name"] == name]
    budget = [b for b in reader_costs.budgets(reader.rows) if b["agent"] == name]
    return {**rows[0], "claimed": [d for d in deliveries if d["state"] == "claimed"],
            "dead": [d for d in deliveries if d["state"] == "dead"],
            "cost": next(iter(spent), None), "budget": next(iter(budget), None)}  # fmt: skip
