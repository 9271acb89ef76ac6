"""The endpoints about the API itself: health (no token needed) and the OpenAPI document."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from agentmaild import __version__
from agentmaild.http.context import context_of
from agentmaild.http.openapi import document


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/health", health, methods=["GET"]),
        Route("/v1/openapi.json", openapi, methods=["GET"]),
    ]


async def health(request: Request) -> JSONResponse:
    """Liveness: answers without touching the store or asking for a token."""
    ctx = context_of(request)
    return JSONResponse(
        {
            "ok": True,
            "version": __version__,
            "uptime_s": round(time.monotonic() - ctx.started, 3),
            "require_tokens": ctx.http.require_tokens,
        }
    )


async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(document())
