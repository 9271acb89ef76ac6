"""The ledgers of the in-memory fake (``store.ledgers``): the agent process journal, the HTTP
API tokens, the trust domains (peers, envelope nonces, origins, relay marks), the delivery history.
"""

from __future__ import annotations

from dataclasses import replace

from agentmaild.errors import StoreError
from agentmaild.models import Attempt, Message
from agentmaild.store.memory.state import MemoryState, atomic
from agentmaild.store.records import AgentProc
from agentmaild.trust.peers import PEER_PREFIX, Peer, PeerOrigin
from agentmaild.trust.tokens import ApiToken


class MemoryProcs(MemoryState):
    """The ``MailStore`` agent process operations over a dict keyed like the table's primary key."""

    @atomic
    def record_proc(self, proc: AgentProc) -> None:
        self._procs[(proc.pid, proc.start_time)] = proc

    @atomic
    def forget_proc(self, pid: int, start_time: str) -> bool:
        return self._procs.pop((pid, start_time), None) is not None

    @atomic
    def list_procs(self, agent: str | None = None) -> list[AgentProc]:
        rows = [p for p in self._procs.values() if agent is None or p.agent == agent]
        return sorted(rows, key=lambda p: (p.started_at, p.pid))


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


class MemoryTrust(MemoryState):
    """The ``MailStore`` trust-domain operations over dicts (see ``memory.state``)."""

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


class MemoryHistory(MemoryState):
    """The ``MailStore`` delivery-history operations over the fake's list."""

    @atomic
    def record_attempt(self, attempt: Attempt) -> None:
        self._append_attempt(attempt)

    @atomic
    def list_attempts(
        self,
        *,
        agent: str | None = None,
        message_id: str | None = None,
        since: float | None = None,
        limit: int | None = 100,
    ) -> list[Attempt]:
        def keep(a: Attempt) -> bool:
            return (
                agent in (None, a.agent)
                and (since is None or a.at >= since)
                and (message_id is None or message_id in a.message_ids)
            )

        found = [a for a in reversed(self._attempts) if keep(a)]
        return found if limit is None or limit < 0 else found[:limit]  # LIMIT -1: no limit

    @atomic
    def purge_attempts(
        self, *, older_than: float | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        if older_than is None and agent is None and not everything:
            return 0

        def gone(a: Attempt) -> bool:
            return (older_than is None or a.at < older_than) and agent in (None, a.agent)

        kept = [a for a in self._attempts if not gone(a)]
        n, self._attempts = len(self._attempts) - len(kept), kept
        return n
