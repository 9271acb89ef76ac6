"""Who may see the dashboard and how its few writes are guarded.

Tokens on (``http.require_tokens``, the default): the browser opens ``/?token=amt_…`` once (the
URL ``agentmaild dashboard`` prints); an operator token is checked against the store, kept in an
HttpOnly, SameSite=Strict cookie, and the browser is sent on without it in the address bar.
Every request after that is checked again (revoking the token ends the session), through a
5-second cache so that live updates do not cost a store read each.

Tokens off (loopback only): any local caller may look, but the ``Host`` header must name a
loopback address — a DNS-rebinding page on another name gets 403.

Writes (POST) need all of: a session as above, an ``Origin`` (or ``Referer``) equal to the
dashboard's own, and the CSRF token of that session (an HMAC of it under a per-process secret,
sent by htmx as the ``X-CSRF-Token`` header).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import structlog
from starlette.requests import Request

from agentmaild.tokens import OPERATOR_AGENT, hash_secret

log = structlog.get_logger(__name__)
COOKIE = "am_dashboard"
CSRF_HEADER = "x-csrf-token"
_CACHE_S = 5.0
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True, slots=True)
class Session:
    key: str  # the token's hash, or "local" without tokens
    token_id: str | None


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Guard:
    """Sessions and CSRF tokens for one daemon run; ``find_token`` looks a hash up in the store."""

    def __init__(self, require_tokens: bool, find_token: Any) -> None:
        self.require_tokens = require_tokens
        self._find_token = find_token  # async (digest) -> ApiToken | None
        self._secret = secrets.token_bytes(32)
        self._cache: dict[str, tuple[float, str | None]] = {}

    def csrf(self, session: Session) -> str:
        return hmac.new(self._secret, session.key.encode(), hashlib.sha256).hexdigest()

    async def session(self, request: Request, secret: str | None = None) -> Session:
        """The session of ``request`` (``secret``: a token given in the URL), else ``Refused``."""
        if not self.require_tokens:
            host = (request.headers.get("host") or "").rsplit(":", 1)[0]
            if host not in _LOOPBACK_HOSTS:
                log.warning("dashboard.refused", status=403, reason="host is not loopback")
                raise Refused(403, "this dashboard answers only to a loopback host name")
            return Session(key="local", token_id=None)
        secret = secret or request.cookies.get(COOKIE)
        if not secret:
            raise Refused(401, "no session: open the URL that `agentmaild dashboard` prints")
        digest = hash_secret(secret)
        token_id = await self._check(digest)
        return Session(key=digest, token_id=token_id)

    async def _check(self, digest: str) -> str | None:
        now = time.monotonic()
        cached = self._cache.get(digest)
        if cached is not None and now - cached[0] < _CACHE_S:
            if cached[1] is None:
                raise Refused(401, "that token is unknown, expired, revoked or not an operator's")
            return cached[1]
        token = await self._find_token(digest)
        ok = (token is not None and token.agent == OPERATOR_AGENT
              and token.usable(time.time()) is None and "read" in token.scopes)  # fmt: skip
        if len(self._cache) > 256:
            self._cache.clear()
        self._cache[digest] = (now, token.id if ok and token is not None else None)
        if not ok:
            log.warning("dashboard.refused", status=401,
                        token_id=token.id if token is not None else None)  # fmt: skip
            raise Refused(401, "that token is unknown, expired, revoked or not an operator's")
        return str(token.id) if token is not None else None

    def check_write(self, request: Request, session: Session) -> None:
        """Same origin and the session's CSRF token, else ``Refused(403)``."""
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        origin = request.headers.get("origin")
        if origin is None:
            referer = urlsplit(request.headers.get("referer", ""))
            origin = f"{referer.scheme}://{referer.netloc}" if referer.netloc else None
        if origin != own:
            log.warning("dashboard.refused", status=403, reason="cross-origin write",
                        token_id=session.token_id)  # fmt: skip
            raise Refused(403, "refused: the request did not come from this dashboard's page")
        given = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.csrf(session).encode()):
            log.warning("dashboard.refused", status=403, reason="bad csrf token",
                        token_id=session.token_id)  # fmt: skip
            raise Refused(403, "refused: missing or stale CSRF token; reload the page")
