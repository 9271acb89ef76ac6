"""The trust domains on PostgreSQL: peers, envelope nonces, peer-mail origins and relay marks."""

from __future__ import annotations

import psycopg

from agentmaild.errors import StoreError
from agentmaild.models import Message
from agentmaild.store.postgres_rows import message_from_row
from agentmaild.store.postgres_tx import PQ, Conn, PostgresTransactions, Row
from agentmaild.trust.peers import Peer, PeerOrigin


def _peer(row: Row) -> Peer:
    return Peer(name=str(row["name"]), public_key=str(row["public_key"]),
                key_id=str(row["key_id"]), url=row["url"],
                created_at=float(row["created_at"]))  # fmt: skip


class PostgresTrust(PostgresTransactions):
    """The ``MailStore`` trust-domain operations on PostgreSQL."""

    def add_peer(self, peer: Peer) -> None:
        params = peer.to_dict()
        if self.find_peer(peer.name) is not None:  # the common case, with a clear message
            raise StoreError(f"peer {peer.name!r}: already added (remove it first)")
        try:
            self._write(lambda conn: conn.execute(PQ["peer_insert"], params))
        except psycopg.errors.UniqueViolation:
            raise StoreError(f"peer {peer.name!r}: already added (remove it first)") from None

    def find_peer(self, name: str) -> Peer | None:
        rows = self._read(PQ["peer_get"], {"name": name})
        return _peer(rows[0]) if rows else None

    def list_peers(self) -> list[Peer]:
        return [_peer(r) for r in self._read(PQ["peer_list"])]

    def remove_peer(self, name: str) -> bool:
        return bool(self._write(lambda c: c.execute(PQ["peer_delete"], {"name": name}).rowcount))

    def claim_nonce(self, nonce: str, *, peer: str, expires_at: float, now: float) -> bool:
        def run(conn: Conn) -> bool:
            conn.execute(PQ["nonce_prune"], {"now": now})
            params = {"nonce": nonce, "peer": peer, "expires_at": expires_at}
            return bool(conn.execute(PQ["nonce_claim"], params).rowcount)

        return self._write(run)

    def record_peer_origin(self, origin: PeerOrigin) -> None:
        params = {"message_id": origin.message_id, "peer": origin.peer,
                  "key_id": origin.key_id, "origin_id": origin.origin_id}  # fmt: skip
        self._write(lambda conn: conn.execute(PQ["peer_origin_insert"], params))

    def peer_origin(self, message_id: str) -> PeerOrigin | None:
        rows = self._read(PQ["peer_origin_get"], {"id": message_id})
        if not rows:
            return None
        r = rows[0]
        return PeerOrigin(message_id=str(r["message_id"]), peer=str(r["peer"]),
                          key_id=str(r["key_id"]), origin_id=str(r["origin_id"]))  # fmt: skip

    def mark_relayed(self, message_id: str, *, peer: str, at: float) -> None:
        params = {"message_id": message_id, "peer": peer, "at": at}
        self._write(lambda conn: conn.execute(PQ["relayed_insert"], params))

    def relay_pending(self, limit: int = 100) -> list[Message]:
        return [message_from_row(r) for r in self._read(PQ["relay_pending"], {"limit": limit})]
