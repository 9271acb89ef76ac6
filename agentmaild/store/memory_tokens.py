"""The HTTP API tokens of the in-memory fake: add, find by hash, list and revoke."""

from __future__ import annotations

from dataclasses import replace

from agentmaild.errors import StoreError
from agentmaild.store.memory_state import MemoryState, atomic
from agentmaild.trust.tokens import ApiToken


class MemoryTokens(MemoryState):
    """The ``MailStore`` token operations over a dict keyed by token id."""

    @atomic
    def add_token(self, token: ApiToken) -> None:
        if token.id in self._tokens or any(t.hash == token.hash for t in self._tokens.values()):
            raise StoreError(f"token {token.id}: already stored")  # as the UNIQUE constraints
        self._tokens[token.id] = token

    @atomic
    def find_token(self, digest: str) -> ApiToken | None:
        return next((t for t in self._tokens.values() if t.hash == digest), None)

    @atomic
    def list_tokens(self) -> list[ApiToken]:
        return sorted(self._tokens.values(), key=lambda t: (t.created_at, t.id))

    @atomic
    def revoke_token(self, token_id: str, *, now: float) -> bool:
        token = self._tokens.get(token_id)
        if token is None or token.revoked_at is not None:
            return False
        self._tokens[token_id] = replace(token, revoked_at=now)
        return True
