"""The dashboard's paths on a daemon whose store is PostgreSQL: one clear 501, nothing read.

The dashboard reads through its own read-only SQLite connection (``reader``); a PostgreSQL
store has none, so its pages answer with what to use instead rather than failing per request.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, Route

MESSAGE = (
    "The dashboard needs a SQLite store; this daemon's store is PostgreSQL. "
    "Use the HTTP API (/v1/…) or `agentmaild status` instead.\n"
)
PATHS = ("/", "/timeline", "/mail", "/mail/search", "/mail/thread/{thread_id}", "/dead", "/events")


async def _unavailable(request: Request) -> PlainTextResponse:
    return PlainTextResponse(MESSAGE, status_code=501, headers={"cache-control": "no-store"})


def routes() -> list[BaseRoute]:
    pages: list[BaseRoute] = [Route(p, _unavailable, methods=["GET"]) for p in PATHS]
    return [*pages, Route("/actions/{action}/{name}", _unavailable, methods=["POST"])]
