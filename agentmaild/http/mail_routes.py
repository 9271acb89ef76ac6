"""The mail endpoints: probe, fetch, ack, send, reply, thread, list and take (``check``).

Each handler parses, authorizes, then runs the same code the CLI runs (``Mailer``, the store's
operations, ``fast.take_and_render``) in the store's worker thread; a send wakes the recipients'
delivery loops exactly as the CLI's poke does (``Supervisor.wake``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from agentmaild.errors import NotFound
from agentmaild.http.auth import Caller, authorize
from agentmaild.http.body import flag, payload_field, read_json, required_text, text_field
from agentmaild.http.context import ApiContext, context_of
from agentmaild.ids import check_message_id, check_name
from agentmaild.mail.mailer import OPERATOR, Sent
from agentmaild.models import Message
from agentmaild.trust.peers import with_origins

REPLY_FIELDS = frozenset(
    {"body", "type", "priority", "payload", "payload_json", "idempotency_key", "from"}
)
SEND_FIELDS = REPLY_FIELDS | {"to", "subject", "thread_id"}


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/inbox", inbox, methods=["GET"]),
        Route("/v1/inbox/take", take, methods=["POST"]),
        Route("/v1/messages", list_messages, methods=["GET"]),
        Route("/v1/messages", send, methods=["POST"]),
        Route("/v1/messages/{id}", fetch, methods=["GET"]),
        Route("/v1/messages/{id}/reply", reply, methods=["POST"]),
        Route("/v1/ack", ack, methods=["POST"]),
        Route("/v1/threads/{id}", thread, methods=["GET"]),
    ]


async def _rows(ctx: ApiContext, found: list[Message], *, whole: bool) -> list[dict[str, Any]]:
    """The messages as the CLI's ``--json`` shows them (peer mail with its verified origin); a
    probe row also carries ``body_length``."""
    rows = await ctx.run(with_origins, ctx.store.sync, found, whole=whole)
    if not whole:
        for row, m in zip(rows, found, strict=True):
            row["body_length"] = len(m.body)
    return rows


async def _body(request: Request, allowed: frozenset[str]) -> dict[str, Any]:
    http = context_of(request).http
    return await read_json(
        request, max_bytes=http.max_body_bytes, timeout_s=http.request_timeout_s, allowed=allowed
    )


async def _known(ctx: ApiContext, agent: str) -> None:
    await ctx.run(ctx.mailer().check_known, agent)


async def inbox(request: Request) -> JSONResponse:
    """Probe: metadata only, no state change."""
    caller = await authorize(request, "read")
    ctx = context_of(request)
    agent = check_name(request.query_params.get("agent") or caller.agent, "agent")
    caller.act_as(agent)
    unread = flag(request.query_params.get("unread"), "unread")
    found = await ctx.run(ctx.store.sync.inbox, agent, unread_only=unread)
    if not found:
        await _known(ctx, agent)
    rows = await _rows(ctx, found, whole=False)
    return JSONResponse({"ok": True, "agent": agent, "messages": rows})


async def _message(request: Request, caller: Caller) -> Message:
    ctx = context_of(request)
    mid = check_message_id(request.path_params["id"])
    m = await ctx.run(ctx.mailer().get, mid)
    if not caller.involved(m.from_agent, m.to_agent):
        # As if absent: a token learns nothing of other agents' mail.
        raise NotFound(f"no message {mid}")
    return m


async def fetch(request: Request) -> JSONResponse:
    """The whole message; does not mark it read."""
    caller = await authorize(request, "read")
    m = await _message(request, caller)
    [row] = await _rows(context_of(request), [m], whole=True)
    return JSONResponse({"ok": True, "message": row})


async def ack(request: Request) -> JSONResponse:
    """Mark read; idempotent (ids already read, or unknown, come back as skipped)."""
    caller = await authorize(request, "ack")
    ctx = context_of(request)
    data = await _body(request, frozenset({"ids"}))
    ids = data.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        from agentmaild.errors import ValidationError

        raise ValidationError("ids: expected a non-empty list of message ids")
    for mid in ids:
        check_message_id(mid)
    if not caller.operator:
        for mid in ids:
            m = await ctx.run(ctx.store.sync.get_message, mid)
            if m is not None and m.to_agent != caller.agent:
                caller.forbid(f"{mid} is not addressed to {caller.agent}")
    done = await ctx.run(ctx.store.sync.ack, ids)
    return JSONResponse({"ok": True, "acked": done, "skipped": [i for i in ids if i not in done]})


def _sender(caller: Caller, data: dict[str, Any]) -> str:
    given = text_field(data, "from")
    if caller.operator:
        return check_name(given or OPERATOR, "from")
    if given is not None and given != caller.agent:
        caller.forbid(f"from: this token sends as {caller.agent!r} only")
    return caller.agent


def _sent(ctx: ApiContext, sent: Sent) -> JSONResponse:
    if not sent.duplicate:
        ctx.wake(sorted({m.to_agent for m in sent.messages}))
    return JSONResponse(sent.to_dict(), status_code=200 if sent.duplicate else 201)


async def send(request: Request) -> JSONResponse:
    """Send as the token's agent: the CLI's rules, limits, idempotency keys and errors."""
    caller = await authorize(request, "send")
    ctx = context_of(request)
    data = await _body(request, SEND_FIELDS)
    to = required_text(data, "to")
    if to == "@all" and not caller.operator:
        caller.forbid("to: only an operator token may send to @all")
    sent = await ctx.run(
        ctx.mailer().send,
        sender=_sender(caller, data),
        to=to,
        subject=required_text(data, "subject"),
        body=text_field(data, "body", "") or "",
        type=text_field(data, "type", "status") or "status",
        priority=text_field(data, "priority", "normal") or "normal",
        thread_id=text_field(data, "thread_id"),
        payload=payload_field(data),
        idempotency_key=text_field(data, "idempotency_key"),
    )
    return _sent(ctx, sent)


async def reply(request: Request) -> JSONResponse:
    """Reply in the thread of a message the token's agent sent or received."""
    caller = await authorize(request, "send")
    ctx = context_of(request)
    original = await _message(request, caller)
    data = await _body(request, REPLY_FIELDS)
    sent = await ctx.run(
        ctx.mailer().reply,
        original.id,
        sender=_sender(caller, data),
        body=required_text(data, "body"),
        type=text_field(data, "type"),
        priority=text_field(data, "priority"),
        payload=payload_field(data),
        idempotency_key=text_field(data, "idempotency_key"),
    )
    return _sent(ctx, sent)


async def thread(request: Request) -> JSONResponse:
    """A whole thread, oldest first (for an agent token: the messages it sent or received)."""
    caller = await authorize(request, "read")
    ctx = context_of(request)
    mid = check_message_id(request.path_params["id"])

    def load() -> list[Message]:
        root = ctx.store.sync.get_message(mid)
        return ctx.store.sync.thread(root.thread_id or root.id if root else mid)

    found = [m for m in await ctx.run(load) if caller.involved(m.from_agent, m.to_agent)]
    if not found:
        raise NotFound(f"no thread {mid}")
    return JSONResponse({"ok": True, "messages": await _rows(ctx, found, whole=True)})


async def list_messages(request: Request) -> JSONResponse:
    """Messages newest first, filtered like ``agentmaild list``; metadata only."""
    caller = await authorize(request, "read")
    ctx = context_of(request)
    q = request.query_params
    sender, to = q.get("from"), q.get("to")
    if not caller.operator and caller.agent not in (sender, to):
        caller.forbid(f"this token lists only {caller.agent}'s mail: give from= or to= it")
    limit_text = q.get("limit", "50")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= 10000:
        from agentmaild.errors import ValidationError

        raise ValidationError("limit: expected a whole number from 1 to 10000")
    found = await ctx.run(
        ctx.store.sync.list_messages,
        from_agent=sender,
        to_agent=to,
        type=q.get("type"),
        unread=True if flag(q.get("unread"), "unread") else None,
        limit=int(limit_text),
    )
    return JSONResponse({"ok": True, "messages": await _rows(ctx, found, whole=False)})


async def take(request: Request) -> JSONResponse:
    """``check``: take unread mail and mark it read; ``inject`` renders it as hook context."""
    caller = await authorize(request, "ack")
    if "read" not in caller.scopes:
        caller.forbid("taking mail needs the 'read' scope too")
    ctx = context_of(request)
    data = await _body(request, frozenset({"agent", "inject"}))
    agent = check_name(text_field(data, "agent") or caller.agent, "agent")
    caller.act_as(agent)
    if data.get("inject", False) is True:
        store = ctx.store.sync
        text, ids = await ctx.run(lambda: _take_and_render(store, agent))
        if not ids:
            await _known(ctx, agent)
        return JSONResponse({"ok": True, "acked": ids, "text": text})
    found = await ctx.run(ctx.store.sync.take_unread, agent)
    if not found:
        await _known(ctx, agent)
    rows = await _rows(ctx, found, whole=True)
    return JSONResponse({"ok": True, "agent": agent, "messages": rows})


def _take_and_render(store: Any, agent: str) -> tuple[str, list[str]]:
    """``check --inject`` on the daemon's store, through the port it lends."""
    from agentmaild.hot import check as fast
    from agentmaild.store.kinds import port_of

    with port_of(store) as port:
        return fast.take_and_render(port, agent)
