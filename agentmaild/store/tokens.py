"""The HTTP API tokens, written once over the connector: add, find by hash, list, revoke."""

from __future__ import annotations

from agentmaild.store.connector import OverConnector
from agentmaild.trust.tokens import ApiToken


class StoreTokens(OverConnector):
    """The ``MailStore`` token operations (``am_tokens``), for every SQL store."""

    def add_token(self, token: ApiToken) -> None:
        params = token.to_row()
        self.db.write(lambda tx: tx.execute("token_insert", params))

    def find_token(self, digest: str) -> ApiToken | None:
        row = self.db.fetch_one("token_by_hash", {"hash": digest})
        return ApiToken.from_row(row) if row is not None else None

    def list_tokens(self) -> list[ApiToken]:
        return [ApiToken.from_row(r) for r in self.db.fetch_all("token_list")]

    def revoke_token(self, token_id: str, *, now: float) -> bool:
        params = {"id": token_id, "now": now}
        return self.db.write(lambda tx: tx.execute("token_revoke", params)) > 0
