"""The error tree mapped to HTTP: ``{"ok": false, "error": {"code", "message"}}`` + a status.

Every code of a ``MailError`` (the caller's mail was refused: its fault or the team's rules) is a
4xx here, so a client does not retry it as it would a 5xx; ``SERVER_FAULTS`` lists the codes that
are 5xx on purpose. ``tests/unit/test_http_errors.py`` walks the error tree to hold both.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from agentmaild.errors import AgentmaildError

# Error code → HTTP status; codes not listed are a server fault (500).
STATUS = {
    "usage": 400,
    "invalid": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "untrusted": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "request_timeout": 408,
    "conflict": 409,
    "invalid_state": 409,
    "loop_held": 409,  # the loop guard holds the thread: retrying will not help, a reset will
    "interrupt_refused": 403,  # only the agent's parent, a lead or the operator may interrupt
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "recipient_refused": 422,
    "rate_limited": 429,
    "inbox_full": 429,
    "store": 503,
    "unsupported": 501,  # a feature this daemon's store cannot offer (SQLite-only paths)
    "client_closed": 400,  # the client hung up mid-body: nobody reads this answer
}
# Codes that are the server's (or the machine's) fault: 500 is their honest answer.
SERVER_FAULTS = frozenset({
    "error", "config", "channel", "busy", "unavailable", "delivery_failed", "control",
    "daemon_not_running", "daemon_not_answering", "protocol", "mail",
})  # fmt: skip


_BODY_UNREAD = frozenset({"request_timeout", "payload_too_large", "client_closed"})


class RequestRefused(AgentmaildError):
    """A request the HTTP layer itself refuses (too large, too slow, wrong content type, …)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ClientGone(RequestRefused):
    """The client closed its connection before its body arrived (logged once, at info)."""

    def __init__(self, message: str) -> None:
        super().__init__("client_closed", message)


def status_of(code: str) -> int:
    return STATUS.get(code, 500)


def error_response(exc: AgentmaildError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(exc.to_json(), status_code=status_of(exc.code), headers=headers)


async def on_agentmaild_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AgentmaildError)
    headers = {"www-authenticate": "Bearer"} if exc.code == "unauthorized" else None
    if exc.code in _BODY_UNREAD:
        # The body was not read to its end: the connection cannot carry another request, and
        # a client still sending should see it closed now, not when the header deadline falls.
        headers = {"connection": "close"}
    return error_response(exc, headers)


async def on_http_exception(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own refusals: no route (404) and a method the route lacks (405)."""
    status = int(getattr(exc, "status_code", 500))
    if status == 405:
        code, message = "method_not_allowed", f"{request.method} is not allowed on this path"
    elif status == 404:
        code, message = "not_found", f"no such endpoint: {request.url.path[:200]!r}"
    else:
        code, message = "error", str(getattr(exc, "detail", "error"))
    return JSONResponse({"ok": False, "error": {"code": code, "message": message}}, status)


async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    import structlog

    structlog.get_logger(__name__).error(
        "http.failed", path=request.url.path[:200], error=type(exc).__name__
    )
    body = {"ok": False, "error": {"code": "internal", "message": "internal error (logged)"}}
    return JSONResponse(body, status_code=500)
