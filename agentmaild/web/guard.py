"""Who may see the dashboard and how its few writes are guarded.

Tokens on (``http.require_tokens``, the default): the browser opens ``/?token=amt_…`` once (the
URL ``agentmaild dashboard`` prints); an operator token is checked against the store, kept in an
HttpOnly, SameSite=Strict cookie, and the browser is sent on without it in the address bar.
Every request after that is checked again through a ``CACHE_S`` cache (so that live updates do
not cost a store read each), and an open live stream re-checks its session every
``STREAM_CHECK_S``: a revoked token ends pages and open streams within ``CACHE_S +
STREAM_CHECK_S`` (4 s), an expired one within ``STREAM_CHECK_S`` (the cache keeps the expiry).

Scopes: the pages and the stream need ``dashboard`` (what ``agentmaild dashboard`` mints) or
``read`` (an operator token that reads all mail through ``/v1`` anyway); each write needs
``control``. The dashboard's token opens no ``/v1`` route (``tokens``).

Tokens off (loopback only): ``http.local`` admits only the daemon's own user on a loopback
``Host`` to the whole HTTP face, so the dashboard takes every caller that reaches it.

Writes (POST) need all of: a session as above with ``control``, an ``Origin`` (or ``Referer``)
equal to the dashboard's own, and the CSRF token of that session (an HMAC of it under a
per-process secret, sent by htmx as the ``X-CSRF-Token`` header).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

import structlog
from starlette.requests import Request

from agentmaild.errors import AgentmaildError
from agentmaild.trust.tokens import ALL_SCOPES, OPERATOR_AGENT, hash_secret

if TYPE_CHECKING:
    from agentmaild.trust.tokens import ApiToken

log = structlog.get_logger(__name__)
COOKIE = "am_dashboard"
CSRF_HEADER = "x-csrf-token"
CACHE_S = 3.0  # a token looked up is believed this long (its expiry is checked on every use)
STREAM_CHECK_S = 1.0  # an open live stream re-checks its session this often
VIEW_SCOPES = frozenset({"dashboard", "read"})
ACT_SCOPE = "control"
_GONE = "that token is unknown, expired, revoked or not an operator's"


@dataclass(frozen=True, slots=True)
class Session:
    key: str  # the token's hash, or "local" without tokens
    token_id: str | None
    scopes: frozenset[str]


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
        self._cache: dict[str, tuple[float, ApiToken | None]] = {}

    def csrf(self, session: Session) -> str:
        return hmac.new(self._secret, session.key.encode(), hashlib.sha256).hexdigest()

    async def session(self, request: Request, secret: str | None = None) -> Session:
        """The session of ``request`` (``secret``: a token given in the URL), else ``Refused``."""
        if not self.require_tokens:
            return Session(key="local", token_id=None, scopes=frozenset(ALL_SCOPES))
        secret = secret or request.cookies.get(COOKIE)
        if not secret:
            raise Refused(401, "no session: open the URL that `agentmaild dashboard` prints")
        digest = hash_secret(secret)
        token = await self._token(digest)
        if token is None or _gone(token):
            log.warning("dashboard.refused", status=401,
                        token_id=token.id if token is not None else None)  # fmt: skip
            raise Refused(401, _GONE)
        session = Session(key=digest, token_id=token.id, scopes=frozenset(token.scopes))
        if not session.scopes & VIEW_SCOPES:
            self._refuse(session, "dashboard")
        return session

    async def still_valid(self, session: Session) -> bool:
        """Whether ``session``'s token is still in force (an open stream asks every second)."""
        if session.token_id is None:
            return True
        try:
            token = await self._token(session.key)
        except AgentmaildError as exc:  # the store is away: end the stream, the browser retries
            log.warning("dashboard.session_check_failed", error=exc.message[:200])
            return False
        return token is not None and not _gone(token)

    def require(self, session: Session, scope: str) -> None:
        """``Refused(403)`` unless the session's token holds ``scope``."""
        if scope not in session.scopes:
            self._refuse(session, scope)

    def _refuse(self, session: Session, scope: str) -> NoReturn:
        log.warning("dashboard.refused", status=403, reason=f"no {scope} scope",
                    token_id=session.token_id)  # fmt: skip
        raise Refused(403, f"token {session.token_id} lacks the {scope!r} scope; "
                           "`agentmaild dashboard` prints a URL with a token that has it")

    async def _token(self, digest: str) -> ApiToken | None:
        """The stored token with this hash, looked up at most once per ``CACHE_S``."""
        now = time.monotonic()
        cached = self._cache.get(digest)
        if cached is not None and now - cached[0] < CACHE_S:
            return cached[1]
        token: ApiToken | None = await self._find_token(digest)
        if len(self._cache) > 256:
            self._cache.clear()
        self._cache[digest] = (now, token)
        return token

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


def _gone(token: ApiToken) -> bool:
    """Revoked, expired (checked against the clock now, not when it was cached) or an agent's."""
    return token.agent != OPERATOR_AGENT or token.usable(time.time()) is not None
