"""Who a request acts as: its bearer token checked against the store, and the rules it obeys.

``Authorization: Bearer amt_…`` → the stored token with that hash → a ``Caller``. No token is
401 (unless ``http.require_tokens = false``, which the server allows on loopback only: then a
request without one acts as the operator); an unknown, expired or revoked token is 401; a token
asking for another agent, a scope it lacks or ``@all`` without being an operator token is 403.
Every refusal is logged (``http.refused``) with the token's id when known, never the token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog
from starlette.requests import Request

from agentmaild.errors import AccessError, Forbidden
from agentmaild.http.context import context_of
from agentmaild.trust.tokens import OPERATOR_AGENT, SCOPES, hash_secret

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    agent: str  # "operator": acts for every agent
    scopes: tuple[str, ...]
    token_id: str | None  # None: no token (require_tokens = false)
    path: str

    @property
    def operator(self) -> bool:
        return self.agent == OPERATOR_AGENT

    def act_as(self, agent: str) -> None:
        """Refuse unless this caller may read or write as ``agent``."""
        if not self.operator and agent != self.agent:
            self._refuse(f"this token acts as {self.agent!r} only, not {agent[:64]!r}")

    def involved(self, *agents: str) -> bool:
        return self.operator or self.agent in agents

    def _refuse(self, message: str) -> None:
        log.warning("http.refused", status=403, path=self.path, token_id=self.token_id,
                    agent=self.agent, reason=message)
        raise Forbidden(message)

    def forbid(self, message: str) -> None:
        self._refuse(message)


async def authorize(request: Request, scope: str) -> Caller:
    """The caller of ``request``, which must hold ``scope``."""
    ctx = context_of(request)
    path = request.url.path[:200]
    header = request.headers.get("authorization")
    if header is None:
        if not ctx.http.require_tokens:
            return Caller(agent=OPERATOR_AGENT, scopes=SCOPES, token_id=None, path=path)
        raise _unauthorized(path, None, "no token: send Authorization: Bearer <token>")
    kind, _, secret = header.partition(" ")
    secret = secret.strip()
    if kind.lower() != "bearer" or not secret:
        raise _unauthorized(path, None, "malformed Authorization header: expected Bearer <token>")
    token = await ctx.run(ctx.store.sync.find_token, hash_secret(secret))
    if token is None:
        raise _unauthorized(path, None, "unknown token")
    why = token.usable(time.time())
    if why is not None:
        raise _unauthorized(path, token.id, f"token {token.id} is {why}")
    caller = Caller(agent=token.agent, scopes=token.scopes, token_id=token.id, path=path)
    if scope not in token.scopes:
        caller.forbid(f"token {token.id} lacks the {scope!r} scope")
    return caller


def _unauthorized(path: str, token_id: str | None, message: str) -> AccessError:
    log.warning("http.refused", status=401, path=path, token_id=token_id, reason=message)
    return AccessError(message)
