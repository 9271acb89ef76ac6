"""The trust domains, written once over the connector: peers, envelope nonces, peer-mail origins
and relay marks."""

from __future__ import annotations

from agentmaild.errors import StoreError
from agentmaild.models import Message
from agentmaild.store.connector import Duplicate, OverConnector, Row, Tx
from agentmaild.store.rows import message_from_row
from agentmaild.trust.peers import Peer, PeerOrigin


def _peer(row: Row) -> Peer:
    return Peer(name=str(row["name"]), public_key=str(row["public_key"]),
                key_id=str(row["key_id"]), url=row["url"],
                created_at=float(row["created_at"]))  # fmt: skip


def _added_twice(name: str) -> StoreError:
    return StoreError(f"peer {name!r}: already added (remove it first)")


class StoreTrust(OverConnector):
    """The ``MailStore`` trust-domain operations, for every SQL store."""

    def add_peer(self, peer: Peer) -> None:
        params = peer.to_dict()
        if self.find_peer(peer.name) is not None:  # the common case, with a clear message
            raise _added_twice(peer.name)
        try:
            self.db.write(lambda tx: tx.execute("peer_insert", params))
        except Duplicate:  # added by another process since the look
            raise _added_twice(peer.name) from None

    def find_peer(self, name: str) -> Peer | None:
        row = self.db.fetch_one("peer_get", {"name": name})
        return _peer(row) if row is not None else None

    def list_peers(self) -> list[Peer]:
        return [_peer(r) for r in self.db.fetch_all("peer_list")]

    def remove_peer(self, name: str) -> bool:
        return self.db.write(lambda tx: tx.execute("peer_delete", {"name": name})) > 0

    def claim_nonce(self, nonce: str, *, peer: str, expires_at: float, now: float) -> bool:
        def run(tx: Tx) -> bool:
            tx.execute("nonce_prune", {"now": now})
            params = {"nonce": nonce, "peer": peer, "expires_at": expires_at}
            return tx.execute("nonce_claim", params) > 0

        return self.db.write(run)

    def record_peer_origin(self, origin: PeerOrigin) -> None:
        params = {"message_id": origin.message_id, "peer": origin.peer,
                  "key_id": origin.key_id, "origin_id": origin.origin_id}  # fmt: skip
        self.db.write(lambda tx: tx.execute("peer_origin_insert", params))

    def peer_origin(self, message_id: str) -> PeerOrigin | None:
        r = self.db.fetch_one("peer_origin_get", {"id": message_id})
        if r is None:
            return None
        return PeerOrigin(message_id=str(r["message_id"]), peer=str(r["peer"]),
                          key_id=str(r["key_id"]), origin_id=str(r["origin_id"]))  # fmt: skip

    def mark_relayed(self, message_id: str, *, peer: str, at: float) -> None:
        params = {"message_id": message_id, "peer": peer, "at": at}
        self.db.write(lambda tx: tx.execute("relayed_insert", params))

    def relay_pending(self, limit: int = 100) -> list[Message]:
        return [message_from_row(r) for r in self.db.fetch_all("relay_pending", {"limit": limit})]
