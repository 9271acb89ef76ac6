"""The dashboard's routes: pages (GET), the SSE stream and the three guarded writes (POST).

Every route asks ``Guard`` for the session first; a write also needs the ``control`` scope.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import anyio
import structlog
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from agentmaild.errors import AgentmaildError
from agentmaild.ids import check_name
from agentmaild.web.guard import ACT_SCOPE, COOKIE, STREAM_CHECK_S, Refused, Session
from agentmaild.web.hub import HubFull, Subscriber

log = structlog.get_logger(__name__)

if TYPE_CHECKING:
    from agentmaild.web.dashboard import Dashboard

STATIC = Path(__file__).parent / "static"
KEEPALIVE_S = 15.0
MAX_QUERY = 200  # characters of a search or a filter we look at
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
Page = Callable[[Request, Session], Awaitable[Response]]


def routes(board: Dashboard) -> list[BaseRoute]:
    from agentmaild.web.operator import operator_routes

    views = _Views(board)
    return [
        *operator_routes(views),
        Route("/", views.page(views.team), methods=["GET"]),
        Route("/timeline", views.page(views.timeline), methods=["GET"]),
        Route("/mail", views.page(views.mail), methods=["GET"]),
        Route("/mail/search", views.page(views.search), methods=["GET"]),
        Route("/mail/thread/{thread_id}", views.page(views.thread), methods=["GET"]),
        Route("/dead", views.page(views.dead), methods=["GET"]),
        Route("/events", views.page(views.events), methods=["GET"]),
        Route("/actions/{action}/{name}", views.action, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]


def html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


class _Views:
    def __init__(self, board: Dashboard) -> None:
        self.b = board

    async def _page(
        self, request: Request, session: Session, template: str, **ctx: Any
    ) -> Response:
        """A whole page: the header's Needs you count is live on every page (``needs_n``)."""
        live = ctx.pop("live", None)
        topics = [*([live] if isinstance(live, str) else live or []), "needs_n"]
        ctx.update(csrf=self.b.guard.csrf(session), path=request.url.path,
                   live=urlencode([("topic", t) for t in topics]),
                   needs_n=len(await self.b.extras.needs_now()))  # fmt: skip
        return html(self.b.render(template, **ctx))

    def refused(self, exc: Refused) -> Response:
        return html(self.b.render("error.html", status=exc.status, message=exc.message), exc.status)

    def page(self, view: Page) -> Callable[[Request], Awaitable[Response]]:
        """``view`` behind the session check; ``?token=`` becomes the cookie, then a redirect."""

        async def endpoint(request: Request) -> Response:
            secret = request.query_params.get("token")
            try:
                session = await self.b.guard.session(request, secret)
            except Refused as exc:
                return self.refused(exc)
            if secret:
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                response = RedirectResponse(_with_query(request.url.path, rest), status_code=303)
                response.set_cookie(COOKIE, secret, httponly=True, samesite="strict",
                                    secure=request.url.scheme == "https", path="/")  # fmt: skip
                return response
            return await view(request, session)

        return endpoint

    # -- pages ----------------------------------------------------------------------------
    async def team(self, request: Request, session: Session) -> Response:
        team = await self.b.team_now()
        return await self._page(request, session, "team.html", team=team, live="team")

    async def timeline(self, request: Request, session: Session) -> Response:
        agent = _agent_param(request)
        data = await self.b.reader.call(self.b.reader.timeline, agent)
        team = await self.b.reader.call(self.b.reader.team)
        return await self._page(request, session, "timeline.html", **data, agent=agent,
                          agents=[a["name"] for a in team], live=f"timeline:{agent or ''}")

    async def mail(self, request: Request, session: Session) -> Response:
        q = request.query_params.get("q", "")[:MAX_QUERY]
        results = await self.b.reader.call(self.b.reader.search, q) if q.strip() else None
        threads = await self.b.reader.call(self.b.reader.threads)
        return await self._page(request, session, "mail.html", q=q, results=results,
                                threads=threads, window=self.b.reader.search_window)  # fmt: skip

    async def search(self, request: Request, session: Session) -> Response:
        q = request.query_params.get("q", "")[:MAX_QUERY]
        results = await self.b.reader.call(self.b.reader.search, q) if q.strip() else None
        window = self.b.reader.search_window
        return html(self.b.render("_results.html", q=q, results=results, window=window))

    async def thread(self, request: Request, session: Session) -> Response:
        thread_id = request.path_params["thread_id"][:MAX_QUERY]
        messages = await self.b.reader.call(self.b.reader.thread, thread_id)
        if not messages:
            return self.refused(Refused(404, f"no thread {thread_id}"))
        return await self._page(request, session, "thread.html", messages=messages,
                                thread=thread_id)  # fmt: skip

    async def dead(self, request: Request, session: Session) -> Response:
        dead = await self.b.reader.call(self.b.reader.dead)
        return await self._page(request, session, "dead.html", dead=dead, live="dead")

    # -- live updates -----------------------------------------------------------------------
    async def events(self, request: Request, session: Session) -> Response:
        topics = frozenset(t for t in request.query_params.getlist("topic") if _topic_ok(t))
        if not topics:
            return self.refused(Refused(400, "ask for a topic: team, dead, needs, needs_n, graph, "
                                             "timeline:<agent>, agent:<agent> or log:<agent>"))
        try:
            sub = self.b.hub.subscribe(topics)
        except HubFull as exc:
            return self.refused(Refused(503, str(exc)))
        latest = [(t, self.b.hub.latest[t]) for t in topics if t in self.b.hub.latest]

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 1000\n\n"
                for topic, fragment in latest:
                    yield _sse(topic, fragment)
                async for chunk in self._live(session, sub):
                    yield chunk
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return  # dropped as too slow: the browser reconnects and starts afresh
            finally:
                self.b.hub.unsubscribe(sub)

        headers = {**SECURITY_HEADERS, "x-accel-buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def _live(self, session: Session, sub: Subscriber) -> AsyncIterator[str]:
        """The stream's events, a keep-alive after ``KEEPALIVE_S`` of quiet, until the session
        ends: its token is re-checked every ``STREAM_CHECK_S``, so a revoked or expired token
        closes the stream (the browser's reconnect then gets 401)."""
        quiet_since = anyio.current_time()
        while await self.b.guard.still_valid(session):
            item: tuple[str, str] | None = None
            with anyio.move_on_after(STREAM_CHECK_S):  # never yield inside the scope
                item = await sub.receive.receive()
            if item is not None:
                quiet_since = anyio.current_time()
                yield _sse(*item)
            elif anyio.current_time() - quiet_since >= KEEPALIVE_S:
                quiet_since = anyio.current_time()
                yield ": keepalive\n\n"
        log.info("dashboard.stream_ended", reason="session ended", token_id=session.token_id)

    # -- the writes -------------------------------------------------------------------------
    async def write(self, request: Request, do: Callable[[], Awaitable[str]]) -> Response:
        """Every write: a session with ``control``, same origin and its CSRF token, then ``do``
        (whose text is the flash); refused or failed, nothing is written."""
        try:
            session = await self.b.guard.session(request)
            self.b.guard.require(session, ACT_SCOPE)
            self.b.guard.check_write(request, session)
        except Refused as exc:
            return html(self.b.render("_flash.html", ok=False, text=exc.message), exc.status)
        try:
            text = await do()
        except AgentmaildError as exc:
            status = 404 if exc.code == "not_found" else 400
            return html(self.b.render("_flash.html", ok=False, text=str(exc)), status)
        return html(self.b.render("_flash.html", ok=True, text=text))

    async def action(self, request: Request) -> Response:
        action, name = request.path_params["action"], request.path_params["name"][:MAX_QUERY]
        return await self.write(request, lambda: self._act(action, name))

    async def _act(self, action: str, name: str) -> str:
        control = self.b.control
        if action == "retry":
            result = await control.handle("retry", {"delivery": name})
            return f"requeued {', '.join(result['requeued'])}"
        if action in ("release", "read"):
            from agentmaild.web.operator import act_on_mail

            return await act_on_mail(self.b, action, name)
        check_name(name, "agent")
        if action == "pause":
            await control.handle("pause", {"agent": name})
            return f"paused {name}"
        if action == "resume":
            await control.handle("resume", {"agent": name})
            return f"resumed {name}"
        from agentmaild.errors import ValidationError

        raise ValidationError(f"unknown action {action[:40]!r}")


def _sse(topic: str, fragment: str) -> str:
    event = topic.partition(":")[0]  # timeline:NAME → timeline, agent:NAME → agent, …
    data = "".join(f"data: {line}\n" for line in fragment.splitlines() or [""])
    return f"event: {event}\n{data}\n"


def _topic_ok(topic: str) -> bool:
    if topic in ("team", "dead", "timeline:", "needs", "needs_n", "graph"):
        return True
    kind, _, agent = topic.partition(":")
    try:
        return kind in ("timeline", "agent", "log") and check_name(agent, "agent") == agent
    except AgentmaildError:
        return False


def _agent_param(request: Request) -> str | None:
    agent = request.query_params.get("agent", "").strip()[:MAX_QUERY]
    return agent or None


def _with_query(path: str, items: list[tuple[str, str]]) -> str:
    return f"{path}?{urlencode(items)}" if items else path
