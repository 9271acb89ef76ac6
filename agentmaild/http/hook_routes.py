"""``POST /v1/hooks/{event}``: a remote Claude Code hook's event, run on the daemon's store.

The body is ``{"agent", "input": <the hook's stdin as text>, "quiet", "vendor"}`` (``vendor``:
the hook's ``--vendor``, default ``claude``: the output's shape and the ack rule); the answer is
``{"ok", "exit", "stdout"}`` for the hook process to print (``hooks.remote``). Delivering mail
acks it, so the token needs the read and ack scopes. The handlers run on the port the store lends
on its own connection (``store.ports.port_of``), whichever store it is.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from agentmaild.errors import NotFound
from agentmaild.hooks.vendors import VENDORS
from agentmaild.http.auth import authorize
from agentmaild.http.body import read_json, text_field
from agentmaild.http.context import context_of
from agentmaild.http.errors import RequestRefused
from agentmaild.ids import check_name


def routes() -> list[BaseRoute]:
    return [Route("/v1/hooks/{event}", hook, methods=["POST"])]


async def hook(request: Request) -> JSONResponse:
    from agentmaild.hooks.run import canonical_event
    from agentmaild.hooks.serve import serve_hook
    from agentmaild.store.kinds import port_of

    caller = await authorize(request, "ack")
    if "read" not in caller.scopes:
        caller.forbid("a hook delivers mail: the token needs the 'read' scope too")
    event = request.path_params["event"]
    if canonical_event(event) is None:
        raise NotFound(f"no hook event {event[:60]!r}")
    ctx = context_of(request)
    http = ctx.http
    data = await read_json(request, max_bytes=http.max_body_bytes,
                           timeout_s=http.request_timeout_s,
                           allowed=frozenset({"agent", "input", "quiet", "vendor"}))  # fmt: skip
    agent = check_name(text_field(data, "agent") or caller.agent, "agent")
    caller.act_as(agent)
    raw = (text_field(data, "input") or "").encode("utf-8", "surrogatepass")
    store, quiet = ctx.store.sync, data.get("quiet") is True
    vendor = text_field(data, "vendor") or "claude"
    if vendor not in VENDORS:
        raise RequestRefused("invalid", f"vendor must be one of {', '.join(VENDORS)}")

    def served() -> tuple[int, str, bool]:
        with port_of(store) as port:
            return serve_hook(event, agent, raw, quiet, port, vendor=vendor)

    code, out, poked = await ctx.run(served)
    if poked:
        ctx.wake([agent])
    return JSONResponse({"ok": True, "exit": code, "stdout": out})
