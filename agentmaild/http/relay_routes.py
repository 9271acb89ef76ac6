"""``POST /v1/relay``: mail from a peer trust domain, authenticated by its envelope's signature
(no token): see ``agentmaild.trust.receive`` for the checks. Answers the ids delivered here;
each refusal is logged (``relay.refused``, with the reason and the claimed domain)."""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from agentmaild.errors import AgentmaildError
from agentmaild.http.body import read_json
from agentmaild.http.context import context_of
from agentmaild.http.errors import ClientGone
from agentmaild.trust.receive import REQUEST_FIELDS, accept, own_domain

log = structlog.get_logger(__name__)


def routes() -> list[BaseRoute]:
    return [Route("/v1/relay", relay, methods=["POST"])]


async def relay(request: Request) -> JSONResponse:
    try:
        return await _relay(request)
    except ClientGone:
        raise  # nothing was refused: the client left (``body`` logged it once)
    except AgentmaildError as exc:
        log.warning("relay.refused", code=exc.code, reason=exc.message[:300],
                    client=request.client.host if request.client else None)  # fmt: skip
        raise


async def _relay(request: Request) -> JSONResponse:
    ctx = context_of(request)
    http = ctx.http
    data = await read_json(request, max_bytes=http.max_body_bytes,
                           timeout_s=http.request_timeout_s, allowed=REQUEST_FIELDS)  # fmt: skip
    here = await anyio.to_thread.run_sync(own_domain, ctx.db)
    sent, peer = await ctx.run(accept, ctx.mailer(), data, here=here, now=time.time(),
                               window_s=http.relay_window_s, skew_s=http.relay_skew_s)  # fmt: skip
    if not sent.duplicate:
        ctx.wake(sorted({m.to_agent for m in sent.messages}))
    return JSONResponse({"ok": True, "peer": peer, "ids": [m.id for m in sent.messages],
                         "duplicate": sent.duplicate})  # fmt: skip
