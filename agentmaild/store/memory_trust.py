"""The trust domains of the in-memory fake: peers, envelope nonces, origins and relay marks."""

from __future__ import annotations

from agentmaild.errors import StoreError
from agentmaild.models import Message
from agentmaild.store.memory_state import MemoryState, atomic
from agentmaild.trust.peers import PEER_PREFIX, Peer, PeerOrigin


class MemoryTrust(MemoryState):
    """The ``MailStore`` trust-domain operations over dicts (see ``memory_state``)."""

    @atomic
    def add_peer(self, peer: Peer) -> None:
        if peer.name in self._peers:
            raise StoreError(f"peer {peer.name!r}: already added (remove it first)")
        self._peers[peer.name] = peer

    @atomic
    def find_peer(self, name: str) -> Peer | None:
        return self._peers.get(name)

    @atomic
    def list_peers(self) -> list[Peer]:
        return sorted(self._peers.values(), key=lambda p: p.name)

    @atomic
    def remove_peer(self, name: str) -> bool:
        return self._peers.pop(name, None) is not None

    @atomic
    def claim_nonce(self, nonce: str, *, peer: str, expires_at: float, now: float) -> bool:
        for old in [n for n, (_, until) in self._nonces.items() if until < now]:
            del self._nonces[old]
        if nonce in self._nonces:
            return False
        self._nonces[nonce] = (peer, expires_at)
        return True

    @atomic
    def record_peer_origin(self, origin: PeerOrigin) -> None:
        taken = any((o.peer, o.origin_id) == (origin.peer, origin.origin_id)
                    for o in self._origins.values())  # fmt: skip
        if origin.message_id not in self._origins and not taken:
            self._origins[origin.message_id] = origin

    @atomic
    def peer_origin(self, message_id: str) -> PeerOrigin | None:
        return self._origins.get(message_id)

    @atomic
    def mark_relayed(self, message_id: str, *, peer: str, at: float) -> None:
        self._relayed.setdefault(message_id, (peer, at))

    @atomic
    def relay_pending(self, limit: int = 100) -> list[Message]:
        pending = [m for m in self._messages.values()
                   if m.to_agent.startswith(PEER_PREFIX) and m.id not in self._relayed]  # fmt: skip
        return sorted(pending, key=lambda m: (m.created_at, m.id))[:limit]
