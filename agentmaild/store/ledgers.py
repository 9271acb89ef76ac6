"""The ledgers of the ``MailStore`` contract: what a store keeps beside the mail.

The daemon's journal of the agent processes it started, the HTTP API's tokens, the trust domains'
peers, nonces and origins, the delivery history, and the team rules its daemon wrote (the store's
settings). ``base.MailStore`` inherits these abstract methods; each store implements them in its
seams (``procs``, ``tokens``, ``trust``, ``history``, ``rule_state`` over the connector;
``memory.ledgers`` and ``memory.rules`` in the fake).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from agentmaild.models import Attempt, Message
from agentmaild.store.records import AgentProc
from agentmaild.trust.peers import Peer, PeerOrigin
from agentmaild.trust.tokens import ApiToken


class Ledgers(abc.ABC):
    """Agent processes, API tokens, trust peers and the delivery history (``MailStore``'s part)."""

    # -- agent processes --------------------------------------------------------------------
    @abc.abstractmethod
    def record_proc(self, proc: AgentProc) -> None:
        """Journal a started agent process (a row with the same pid and start time is replaced)."""

    @abc.abstractmethod
    def forget_proc(self, pid: int, start_time: str) -> bool:
        """Drop the row of a process that was stopped; False when there was none."""

    @abc.abstractmethod
    def list_procs(self, agent: str | None = None) -> list[AgentProc]:
        """Journalled processes (of ``agent``), oldest first."""

    # -- HTTP API tokens (schema 4) -----------------------------------------------------------
    @abc.abstractmethod
    def add_token(self, token: ApiToken) -> None:
        """Store a new token record (its hash, never the secret)."""

    @abc.abstractmethod
    def find_token(self, digest: str) -> ApiToken | None:
        """The token whose secret hashes to ``digest``, revoked or expired ones included."""

    @abc.abstractmethod
    def list_tokens(self) -> list[ApiToken]:
        """Every token, oldest first."""

    @abc.abstractmethod
    def revoke_token(self, token_id: str, *, now: float) -> bool:
        """Mark a token revoked at ``now``; False when there is none in force with that id."""

    # -- trust domains (schema 5; agentmaild.trust) -------------------------------------------
    @abc.abstractmethod
    def add_peer(self, peer: Peer) -> None:
        """Pin a peer domain's key; ``StoreError`` when the name is taken."""

    @abc.abstractmethod
    def find_peer(self, name: str) -> Peer | None: ...

    @abc.abstractmethod
    def list_peers(self) -> list[Peer]:
        """Every peer, by name."""

    @abc.abstractmethod
    def remove_peer(self, name: str) -> bool:
        """Forget a peer; False when there was none."""

    @abc.abstractmethod
    def claim_nonce(self, nonce: str, *, peer: str, expires_at: float, now: float) -> bool:
        """Remember ``nonce`` until ``expires_at`` (dropping those expired by ``now``); False
        when it is already remembered: a replay."""

    @abc.abstractmethod
    def record_peer_origin(self, origin: PeerOrigin) -> None:
        """Note where a message delivered from a peer came from (a repeat is ignored)."""

    @abc.abstractmethod
    def peer_origin(self, message_id: str) -> PeerOrigin | None: ...

    @abc.abstractmethod
    def mark_relayed(self, message_id: str, *, peer: str, at: float) -> None:
        """Note that mail to ``peer:NAME/agent`` was accepted by the peer (idempotent)."""

    @abc.abstractmethod
    def relay_pending(self, limit: int = 100) -> list[Message]:
        """Mail addressed to ``peer:…`` not yet relayed, oldest first."""

    # -- delivery history -------------------------------------------------------------------
    @abc.abstractmethod
    def record_attempt(self, attempt: Attempt) -> None:
        """Append one finished attempt to the history (the store assigns its ``id``)."""

    @abc.abstractmethod
    def list_attempts(
        self,
        *,
        agent: str | None = None,
        message_id: str | None = None,
        since: float | None = None,
        limit: int | None = 100,
    ) -> list[Attempt]:
        """Newest first; ``since`` (unix seconds) keeps attempts that ended then or later."""

    @abc.abstractmethod
    def purge_attempts(
        self, *, older_than: float | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        """Delete history rows that ended before ``older_than`` and/or are ``agent``'s; or all.

        Without a filter and without ``everything`` nothing is deleted. Returns the rows deleted.
        """

    # -- the store's settings (schema 8; PostgreSQL 10) ---------------------------------------
    @abc.abstractmethod
    def team_rules(self) -> dict[str, Any]:
        """The team rules its daemon last wrote (``config.TEAM_RULES`` → value); {} when none
        was written: then the built-in defaults apply (``config.team_limits``)."""

    @abc.abstractmethod
    def set_team_rules(self, rules: Mapping[str, Any], *, now: float) -> bool:
        """Keep ``rules`` as the team's (replacing what was kept); True when they changed."""
