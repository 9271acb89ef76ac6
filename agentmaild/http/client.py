"""The stdlib client of the HTTP API, for the CLI and the hooks when ``AGENTMAIL_URL`` is set.

Only ``http.client`` and ``json`` (``ssl`` for an https URL): the hook and ``check --inject`` load
this on every prompt. An error response becomes the ``AgentmaildError`` its code names, with the
server's message, so the CLI prints and exits exactly as it does on a local store.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from agentmaild.errors import AgentmaildError

URL_ENV = "AGENTMAIL_URL"
TOKEN_ENV = "AGENTMAIL_TOKEN"
TIMEOUT_S = 30.0


def target(url: str | None = None, token: str | None = None) -> tuple[str, str | None] | None:
    """(url, token) from the flags, else ``$AGENTMAIL_URL``/``$AGENTMAIL_TOKEN``; None: local."""
    url = url or os.environ.get(URL_ENV) or None
    if url is None:
        return None
    return url, token or os.environ.get(TOKEN_ENV) or None


def _split(url: str) -> tuple[str, str, int, str]:
    """``http://host:port/prefix`` → (scheme, host, port, prefix) without urllib (import cost)."""
    from agentmaild.errors import UsageError

    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise UsageError(f"{URL_ENV}: expected http://HOST:PORT, got {url[:100]!r}")
    hostport, _, prefix = rest.partition("/")
    host, colon, port = hostport.rpartition(":")
    if not colon or not port.isdigit():
        host, port = hostport, "443" if scheme == "https" else "80"
    if not host:
        raise UsageError(f"{URL_ENV}: no host in {url[:100]!r}")
    return scheme, host.strip("[]"), int(port), ("/" + prefix).rstrip("/")


def _query(params: Mapping[str, str | None]) -> str:
    from urllib.parse import quote  # only when there are parameters: ids and names need none

    pairs = [f"{k}={quote(v, safe='')}" for k, v in params.items() if v is not None]
    return "?" + "&".join(pairs) if pairs else ""


def call(
    remote: tuple[str, str | None],
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    query: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """One request; the JSON answer, or the error it carries raised as an ``AgentmaildError``."""
    import http.client

    url, token = remote
    scheme, host, port, prefix = _split(url)
    headers = {"accept": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["content-type"] = "application/json"
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = kind(host, port, timeout=TIMEOUT_S)
    try:
        conn.request(method, prefix + path + _query(query or {}), body=data, headers=headers)
        response = conn.getresponse()
        status, raw = response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        from agentmaild.errors import DaemonNotRunning

        raise DaemonNotRunning(f"cannot reach agentmaild at {url}: {exc}") from exc
    finally:
        conn.close()
    return _answer(url, status, raw)


def _answer(url: str, status: int, raw: bytes) -> dict[str, Any]:
    try:
        answer = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        answer = None
    if not isinstance(answer, dict):
        from agentmaild.errors import ProtocolError

        raise ProtocolError(f"{url} answered {status} without a JSON object: is it agentmaild?")
    if status >= 400 or answer.get("ok") is False:
        found = answer.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        raise error_from(str(error.get("code", "error")), str(error.get("message", status)))
    return answer


def error_from(code: str, message: str) -> AgentmaildError:
    """The error class the server's code names (``not_found`` → NotFound, …)."""
    from agentmaild import errors

    classes: list[type[errors.AgentmaildError]] = [
        errors.UsageError, errors.ConfigError, errors.StoreError, errors.NotFound,
        errors.AccessError, errors.Forbidden, errors.ValidationError, errors.RecipientRefused,
        errors.RateLimited, errors.InboxFull, errors.Conflict, errors.LoopHeld, errors.StateError,
        errors.Untrusted, errors.InterruptRefused,
    ]  # fmt: skip
    for cls in classes:
        if cls.code == code:
            return cls(message)
    exc = errors.AgentmaildError(message)
    exc.code = code
    return exc
