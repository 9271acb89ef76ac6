"""``Dashboard``: what the pages share (reader, hub, guard, templates) and the one SSE producer.

The producer looks every ``TICK_S`` while at least one browser is subscribed (and sleeps on the
hub otherwise) and coalesces per topic: a part (the team table, a timeline, the dead letters) that
was read or sent is not looked at again for ``LIVE_EVERY_S``, so a view gets at most one update
per ``LIVE_EVERY_S`` however often the store changes, and that update carries the latest state: a
change is shown at most ``LIVE_EVERY_S`` after it happened (plus the render), one found after a
quiet spell within a tick. The producer wakes when a part falls due, not on the next tick after,
so the bound holds without drift. Each look makes one call on the reader's own thread
(``Reader.tick``: the store's change mark, then only the due parts that changed) and reads the
supervisor's in-memory snapshot. A fragment is rendered once per topic, in slices of about
``SLICE_S`` that give the event loop (and the delivery loops on it) back in between, and
published only when its HTML changed, to every subscriber of that topic.

Why so few updates: every one costs each open browser a restyle, layout, paint and composite,
whatever changed (measured with headless Chromium on a 2-core VM: about 10 ms of its CPU per
team-table update, 20-25 ms per timeline update of 60 new rows), and that CPU is taken from the
delivery loops; an operator does not read faster than this anyway.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import structlog

from agentmaild.control.handler import ControlHandler
from agentmaild.store.kinds import open_reader
from agentmaild.store.reader import Reader
from agentmaild.web.extras import Extras, owns
from agentmaild.web.guard import Guard
from agentmaild.web.hub import Hub
from agentmaild.web.templating import make_env

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from agentmaild.control.handler import DaemonPort
    from agentmaild.trust.tokens import ApiToken

log = structlog.get_logger(__name__)
# Snapshot fields that move with the clock alone (the page shows ages from stored times instead).
_CLOCK_FIELDS = frozenset({"busy_for_s", "backoff_s", "backoff_until", "stuck"})
TICK_S = 0.25  # how often the producer looks while a browser watches
LIVE_EVERY_S = 0.75  # a part read or sent waits this long (a page shows a change within 1 s)
IDLE_RENDER_S = 1.0  # unchanged data: re-render the team's ages this often
SLICE_S = 0.0005  # rendering yields to the event loop after this much time


class Dashboard:
    """One per daemon run: ``routes()`` for the HTTP face, ``run()`` in its task group."""

    def __init__(self, daemon: DaemonPort, stopping: anyio.Event) -> None:
        self.daemon = daemon
        self.reader: Reader = open_reader(daemon.store.sync)  # the store's read-only reader
        self.hub = Hub()
        self.env = make_env()
        self.guard = Guard(daemon.config.http.require_tokens, self._find_token)
        self.control = ControlHandler(daemon)
        self._stopping = stopping
        self._seen: dict[str, object] = {}  # part → the change mark it was last read at
        self._due_at: dict[str, float] = {}  # part → when it may be looked at again
        self._team_db: list[dict[str, Any]] = []
        self._rendered: set[str] = set()
        self._team_key: tuple[object, str] | None = None
        self._team_at = 0.0
        self.clock = time.monotonic  # the tests drive the coalescing with their own clock
        self.extras = Extras(self)  # the operator's parts: Needs you, agent pages, the graph

    async def _find_token(self, digest: str) -> ApiToken | None:
        store = self.daemon.store
        return await store.run_sync(store.sync.find_token, digest)

    def routes(self) -> list[BaseRoute]:
        from agentmaild.web.views import routes

        return routes(self)

    def render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)

    async def render_sliced(self, template: str, **context: Any) -> str:
        """``render``, giving the event loop back every ``SLICE_S`` of work."""
        parts: list[str] = []
        start = time.perf_counter()
        for piece in self.env.get_template(template).generate(**context):
            parts.append(piece)
            if time.perf_counter() - start >= SLICE_S:
                await anyio.lowlevel.checkpoint()
                start = time.perf_counter()
        return "".join(parts)

    # -- what the pages show --------------------------------------------------------------
    def team(self, db_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The store's rows joined with the supervisor's live view of each loop."""
        loops = self.daemon.supervisor.snapshot()
        return [{**row, "loop": loops.get(row["name"])} for row in db_rows]

    async def team_now(self) -> list[dict[str, Any]]:
        return self.team(await self.reader.call(self.reader.team))

    # -- the producer -----------------------------------------------------------------------
    async def run(self) -> None:
        log.info("dashboard.started")
        try:
            while not self._stopping.is_set():
                await self.hub.wait_wanted()
                try:
                    await self.publish_once()
                except self.reader.errors as exc:  # the daemon's own store watch handles it
                    log.warning("dashboard.read_failed", error=str(exc)[:200])
                    await self.reader.call(self.reader.close)  # reopened on the next tick
                    self._seen.clear()
                # The store has no change feed for a reader: its change mark is polled, but
                # only while a browser watches, and the loop ends with the daemon.
                with anyio.move_on_after(self.pause()):
                    await self._stopping.wait()
        finally:
            self.hub.close_all()
            with anyio.CancelScope(shield=True):
                await self.reader.call(self.reader.close)

    def pause(self) -> float:
        """Until the next tick, or until a part falls due if that comes first."""
        now = self.clock()
        return min([TICK_S, *(at - now for at in self._due_at.values() if at > now)])

    def _due(self, topics: set[str], fresh: set[str], now: float) -> dict[str, object]:
        """Each watched part whose pause is over (a new subscriber's at once) → its last mark."""
        due: dict[str, object] = {}
        for part in sorted(topics):
            if part in fresh:
                self._seen.pop(part, None)
            if part in fresh or now >= self._due_at.get(part, 0.0):
                due[part] = self._seen.get(part)
        return due

    async def publish_once(self) -> None:
        topics = self.hub.topics()
        fresh = topics - self._rendered  # a new subscriber's topic is rendered at once
        self._rendered = topics
        for gone in [t for t in self.hub.latest if t not in topics]:
            del self.hub.latest[gone]  # keep only what someone watches
        for gone in [t for t in self._due_at if t not in topics]:
            del self._due_at[gone]
        now = self.clock()
        due = self._due(topics, fresh, now)
        if not due:
            return
        mark, parts = await self.reader.call(self.reader.tick, due)
        for part in due:
            self._seen[part] = mark
        await self.extras.publish([p for p in due if owns(p)], fresh, mark, now)
        if "team" in parts:
            self._team_db = parts.pop("team")
            self._due_at["team"] = now + LIVE_EVERY_S
        if "team" in due and await self._publish_team(mark, "team" in fresh):
            self._due_at["team"] = now + LIVE_EVERY_S
        for part, data in sorted(parts.items()):
            self._due_at[part] = now + LIVE_EVERY_S
            if part == "dead":
                html = await self.render_sliced("_dead.html", dead=data)
            else:
                agent = part.partition(":")[2] or None
                html = await self.render_sliced("_timeline.html", **data, agent=agent)
            self.offer(part, html)

    async def _publish_team(self, mark: object, fresh: bool) -> bool:
        """Render when the store or a loop changed, or once a second for the ages shown; true
        when an update was sent."""
        loops = self.daemon.supervisor.snapshot()
        moving = {n: {k: v for k, v in r.items() if k not in _CLOCK_FIELDS}
                  for n, r in loops.items()}  # fmt: skip
        key = (mark, repr(moving))
        now = self.clock()
        if not fresh and key == self._team_key and now - self._team_at < IDLE_RENDER_S:
            return False
        self._team_key, self._team_at = key, now
        team = [{**row, "loop": loops.get(row["name"])} for row in self._team_db]
        return self.offer("team", await self.render_sliced("_team.html", team=team))

    def schedule(self, topic: str, now: float, wait_s: float | None = None) -> None:
        """``topic`` was sent at ``now``: look at it again after ``wait_s`` (``LIVE_EVERY_S``)."""
        self._due_at[topic] = now + (LIVE_EVERY_S if wait_s is None else wait_s)

    def offer(self, topic: str, html: str) -> bool:
        if self.hub.latest.get(topic) == html:
            return False
        self.hub.publish(topic, html)
        return True
