"""The error tree mapped to HTTP: ``{"ok": false, "error": {"code", "message"}}`` + a status."""

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
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "recipient_refused": 422,
    "rate_limited": 429,
    "inbox_full": 429,
    "store": 503,
    "unsupported": 501,  # a feature this daemon's store cannot offer (SQLite-only paths)
}


class RequestRefused(AgentmaildError):
    """A request the HTTP layer itself refuses (too large, too slow, wrong content type, …)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def status_of(code: str) -> int:
    return STATUS.get(code, 500)


def error_response(exc: AgentmaildError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(exc.to_json(), status_code=status_of(exc.code), headers=headers)


async def on_agentmaild_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AgentmaildError)
    headers = {"www-authenticate": "Bearer"} if exc.code == "unauthorized" else None
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
