"""``Dashboard``: what the pages share (reader, hub, guard, templates) and the one SSE producer.

The producer wakes every ``TICK_S`` while at least one browser is subscribed (and sleeps on the
hub otherwise). Each tick costs one ``PRAGMA data_version`` and one in-memory supervisor
snapshot; the bounded queries run only when the store changed. A fragment is rendered once per
tick and topic and published only when its HTML changed, to every subscriber of that topic.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from agentmaild.control.handler import ControlHandler
from agentmaild.web.guard import Guard
from agentmaild.web.hub import Hub
from agentmaild.web.reader import Reader
from agentmaild.web.templating import make_env

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from agentmaild.control.handler import DaemonPort
    from agentmaild.tokens import ApiToken

log = structlog.get_logger(__name__)
# Snapshot fields that move with the clock alone (the page shows ages from stored times instead).
_CLOCK_FIELDS = frozenset({"busy_for_s", "backoff_s", "backoff_until", "stuck"})
TICK_S = 0.25  # the team table: a change shows within a tick (the tests hold it to 1 s)
TIMELINE_EVERY_S = 1.0  # the timeline (the costliest fragment) at most this often
IDLE_RENDER_S = 1.0  # unchanged data: re-render the team's ages this often


class Dashboard:
    """One per daemon run: ``routes()`` for the HTTP face, ``run()`` in its task group."""

    def __init__(self, daemon: DaemonPort, stopping: anyio.Event) -> None:
        self.daemon = daemon
        self.reader = Reader(daemon.db)
        self.hub = Hub()
        self.env = make_env()
        self.guard = Guard(daemon.config.http.require_tokens, self._find_token)
        self.control = ControlHandler(daemon)
        self._stopping = stopping
        self._version: int | None = None
        self._team_db: list[dict[str, Any]] = []
        self._rendered: set[str] = set()
        self._team_key: tuple[int | None, str] | None = None
        self._team_at = 0.0
        self._timeline_at = 0.0

    async def _find_token(self, digest: str) -> ApiToken | None:
        store = self.daemon.store
        return await store.run_sync(store.sync.find_token, digest)

    def routes(self) -> list[BaseRoute]:
        from agentmaild.web.views import routes

        return routes(self)

    def render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)

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
                except sqlite3.Error as exc:  # the daemon's own store watch handles a lost file
                    log.warning("dashboard.read_failed", error=str(exc)[:200])
                    await self.reader.call(self.reader.close)  # reopened on the next tick
                    self._version = None
                # The store has no change feed for a reader: data_version is polled, but only
                # while a browser watches, and the loop ends with the daemon.
                with anyio.move_on_after(TICK_S):
                    await self._stopping.wait()
        finally:
            self.hub.close_all()
            with anyio.CancelScope(shield=True):
                await self.reader.call(self.reader.close)

    async def publish_once(self) -> None:
        topics = self.hub.topics()
        version = await self.reader.call(self.reader.data_version)
        changed = version != self._version
        if changed:
            self._team_db = await self.reader.call(self.reader.team)
            self._version = version
        fresh = topics - self._rendered  # a new subscriber's topic is rendered at once
        self._rendered = topics
        for gone in [t for t in self.hub.latest if t not in topics]:
            del self.hub.latest[gone]  # keep only what someone watches
        if "team" in topics:
            self._publish_team("team" in fresh)
        if "dead" in topics and (changed or "dead" in fresh):
            dead = await self.reader.call(self.reader.dead)
            self._offer("dead", self.render("_dead.html", dead=dead))
        now = time.monotonic()
        timeline_due = changed and now - self._timeline_at >= TIMELINE_EVERY_S
        for topic in sorted(t for t in topics if t.startswith("timeline:")):
            if timeline_due or topic in fresh:
                agent = topic.partition(":")[2] or None
                data = await self.reader.call(self.reader.timeline, agent)
                self._offer(topic, self.render("_timeline.html", **data, agent=agent))
                self._timeline_at = now
        if changed and not timeline_due and any(t.startswith("timeline:") for t in topics):
            self._version = None  # not shown yet: look again next tick

    def _publish_team(self, fresh: bool) -> None:
        """Render when the store or a loop changed, or once a second for the ages shown."""
        loops = self.daemon.supervisor.snapshot()
        moving = {n: {k: v for k, v in r.items() if k not in _CLOCK_FIELDS}
                  for n, r in loops.items()}  # fmt: skip
        key = (self._version, repr(moving))
        now = time.monotonic()
        if not fresh and key == self._team_key and now - self._team_at < IDLE_RENDER_S:
            return
        self._team_key, self._team_at = key, now
        team = [{**row, "loop": loops.get(row["name"])} for row in self._team_db]
        self._offer("team", self.render("_team.html", team=team))

    def _offer(self, topic: str, html: str) -> None:
        if self.hub.latest.get(topic) != html:
            self.hub.publish(topic, html)
