"""The HTTP API tokens of the PostgreSQL store: add, find by hash, list and revoke ``am_tokens``."""

from __future__ import annotations

from agentmaild.store.postgres_tx import PQ, PostgresTransactions, Row
from agentmaild.tokens import ApiToken


def _token(row: Row) -> ApiToken:
    return ApiToken(
        id=str(row["id"]),
        agent=str(row["agent"]),
        scopes=tuple(s for s in str(row["scopes"]).split(",") if s),
        hash=str(row["hash"]),
        created_at=float(row["created_at"]),
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )


class PostgresTokens(PostgresTransactions):
    """The ``MailStore`` token operations on PostgreSQL."""

    def add_token(self, token: ApiToken) -> None:
        params = {
            "id": token.id,
            "agent": token.agent,
            "scopes": ",".join(token.scopes),
            "hash": token.hash,
            "created_at": token.created_at,
            "expires_at": token.expires_at,
            "revoked_at": token.revoked_at,
        }
        self._write(lambda conn: conn.execute(PQ["token_insert"], params))

    def find_token(self, digest: str) -> ApiToken | None:
        rows = self._read(PQ["token_by_hash"], {"hash": digest})
        return _token(rows[0]) if rows else None

    def list_tokens(self) -> list[ApiToken]:
        return [_token(r) for r in self._read(PQ["token_list"])]

    def revoke_token(self, token_id: str, *, now: float) -> bool:
        params = {"id": token_id, "now": now}
        return bool(self._write(lambda conn: conn.execute(PQ["token_revoke"], params).rowcount))
