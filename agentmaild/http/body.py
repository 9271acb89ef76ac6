"""Request input: JSON bodies read under the size and time limits, and typed field access.

Every refusal is an ``AgentmaildError`` naming the field or the limit, so the client gets one clear
JSON error: 415 for a body that is not JSON, 413 past ``http.max_body_bytes``, 408 when the body
does not arrive within ``http.request_timeout_s``, 400 for malformed JSON or a wrong field. The
408 and 413 close the connection as they are sent (``errors``). A client that hangs up mid-body
is one ``http.client_gone`` info line (``ClientGone``), not a logged exception.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import structlog
from starlette.requests import ClientDisconnect, Request

from agentmaild.errors import ValidationError
from agentmaild.http.errors import ClientGone, RequestRefused

log = structlog.get_logger(__name__)


async def read_json(
    request: Request, *, max_bytes: int, timeout_s: float, allowed: frozenset[str]
) -> dict[str, Any]:
    """The body as a JSON object with only ``allowed`` keys."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise RequestRefused(
            "unsupported_media_type",
            f"content-type must be application/json, got {ctype[:80] or 'none'!r}",
        )
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
        raise _too_large(max_bytes)
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(timeout_s) as scope:
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise _too_large(max_bytes)
                chunks.append(chunk)
        except ClientDisconnect:
            # Anyone can do this, any number of times: one short line, not an error's trace.
            log.info("http.client_gone", path=request.url.path[:200], received=size)
            raise ClientGone(f"the client closed the connection after {size} body bytes") from None
    if scope.cancelled_caught:
        raise RequestRefused(
            "request_timeout", f"the request body did not arrive within {timeout_s:g}s"
        )
    return _parse(b"".join(chunks), allowed)


def _too_large(max_bytes: int) -> RequestRefused:
    return RequestRefused(
        "payload_too_large", f"request body larger than {max_bytes} bytes (http.max_body_bytes)"
    )


def _parse(raw: bytes, allowed: frozenset[str]) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValidationError(f"body: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:
        raise ValidationError(f"body: malformed JSON ({str(exc)[:120]})") from None
    if not isinstance(data, dict):
        raise ValidationError(f"body: expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValidationError(
            f"body: unknown field {unknown[0][:60]!r}; allowed: {', '.join(sorted(allowed))}"
        )
    return data


def text_field(data: dict[str, Any], key: str, default: str | None = None) -> str | None:
    value = data.get(key, default)
    if value is not None and not isinstance(value, str):
        raise ValidationError(f"{key}: expected a string, got {type(value).__name__}")
    return value


def required_text(data: dict[str, Any], key: str) -> str:
    value = text_field(data, key)
    if value is None:
        raise ValidationError(f"{key}: required")
    return value


def payload_field(data: dict[str, Any]) -> str | None:
    """``payload`` is any JSON value, ``payload_json`` the same as JSON text (what the CLI sends,
    so the rules see exactly its ``--payload``); the mail rules get JSON text either way."""
    text = text_field(data, "payload_json")
    if text is not None:
        if data.get("payload") is not None:
            raise ValidationError("payload: give payload or payload_json, not both")
        return text
    if data.get("payload") is None:
        return None
    return json.dumps(data["payload"], ensure_ascii=False)


def flag(value: str | None, name: str) -> bool:
    """A query flag: 1/true/yes or 0/false/no (absent: false)."""
    if value is None:
        return False
    word = value.strip().lower()
    if word in ("1", "true", "yes"):
        return True
    if word in ("0", "false", "no", ""):
        return False
    raise ValidationError(f"{name}: expected 1 or 0, got {value[:40]!r}")
