"""The trust domains on SQLite: peers, envelope nonces, peer-mail origins and relay marks."""

from __future__ import annotations

import sqlite3

from agentmaild.errors import StoreError
from agentmaild.models import Message
from agentmaild.store.queries import Q
from agentmaild.store.sqlite_rows import message_from_row
from agentmaild.store.sqlite_tx import SqliteTransactions
from agentmaild.trust.peers import Peer, PeerOrigin


def _peer(row: sqlite3.Row) -> Peer:
    return Peer(name=str(row["name"]), public_key=str(row["public_key"]),
                key_id=str(row["key_id"]), url=row["url"],
                created_at=float(row["created_at"]))  # fmt: skip


class SqliteTrust(SqliteTransactions):
    """The ``MailStore`` trust-domain operations on SQLite."""

    def add_peer(self, peer: Peer) -> None:
        params = peer.to_dict()
        if self.find_peer(peer.name) is not None:  # the common case, with a clear message
            raise StoreError(f"peer {peer.name!r}: already added (remove it first)")
        try:
            self._write(lambda conn: conn.execute(Q["peer_insert"], params))
        except sqlite3.IntegrityError:
            raise StoreError(f"peer {peer.name!r}: already added (remove it first)") from None

    def find_peer(self, name: str) -> Peer | None:
        rows = self._read(Q["peer_get"], {"name": name})
        return _peer(rows[0]) if rows else None

    def list_peers(self) -> list[Peer]:
        return [_peer(r) for r in self._read(Q["peer_list"])]

    def remove_peer(self, name: str) -> bool:
        return bool(self._write(lambda c: c.execute(Q["peer_delete"], {"name": name}).rowcount))

    def claim_nonce(self, nonce: str, *, peer: str, expires_at: float, now: float) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            conn.execute(Q["nonce_prune"], {"now": now})
            params = {"nonce": nonce, "peer": peer, "expires_at": expires_at}
            return bool(conn.execute(Q["nonce_claim"], params).rowcount)

        return self._write(run)

    def record_peer_origin(self, origin: PeerOrigin) -> None:
        params = {"message_id": origin.message_id, "peer": origin.peer,
                  "key_id": origin.key_id, "origin_id": origin.origin_id}  # fmt: skip
        self._write(lambda conn: conn.execute(Q["peer_origin_insert"], params))

    def peer_origin(self, message_id: str) -> PeerOrigin | None:
        rows = self._read(Q["peer_origin_get"], {"id": message_id})
        if not rows:
            return None
        r = rows[0]
        return PeerOrigin(message_id=str(r["message_id"]), peer=str(r["peer"]),
                          key_id=str(r["key_id"]), origin_id=str(r["origin_id"]))  # fmt: skip

    def mark_relayed(self, message_id: str, *, peer: str, at: float) -> None:
        params = {"message_id": message_id, "peer": peer, "at": at}
        self._write(lambda conn: conn.execute(Q["relayed_insert"], params))

    def relay_pending(self, limit: int = 100) -> list[Message]:
        return [message_from_row(r) for r in self._read(Q["relay_pending"], {"limit": limit})]
