"""The HTTP API tokens of the SQLite store: add, find by hash, list and revoke ``am_tokens``."""

from __future__ import annotations

from agentmaild.store.queries import Q
from agentmaild.store.sqlite_tx import SqliteTransactions
from agentmaild.tokens import ApiToken


class SqliteTokens(SqliteTransactions):
    """The ``MailStore`` token operations on SQLite."""

    def add_token(self, token: ApiToken) -> None:
        params = token.to_row()
        self._write(lambda conn: conn.execute(Q["token_insert"], params))

    def find_token(self, digest: str) -> ApiToken | None:
        rows = self._read(Q["token_by_hash"], {"hash": digest})
        return ApiToken.from_row(rows[0]) if rows else None

    def list_tokens(self) -> list[ApiToken]:
        return [ApiToken.from_row(r) for r in self._read(Q["token_list"])]

    def revoke_token(self, token_id: str, *, now: float) -> bool:
        params = {"id": token_id, "now": now}
        return bool(self._write(lambda conn: conn.execute(Q["token_revoke"], params).rowcount))
