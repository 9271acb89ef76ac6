"""The MailStore ABC: every operation on mail, agents and deliveries, each one transaction."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentmaild.models import (
    Agent,
    AgentCounts,
    Attempt,
    Batch,
    DeadLetter,
    Message,
    QueueInfo,
)
from agentmaild.store.checks import merged_state, recipient_refusal
from agentmaild.store.guard import RULE_COUNTERS as RULE_COUNTERS
from agentmaild.store.guard import ThreadGuard as ThreadGuard
from agentmaild.store.location import StoreLocation
from agentmaild.trust.peers import Peer, PeerOrigin
from agentmaild.trust.tokens import ApiToken

# Agent fields `update_agent` may change (name and created_at are fixed).
AGENT_MUTABLE_FIELDS = frozenset(
    {
        "capability",
        "parent",
        "channel",
        "command",
        "cwd",
        "tmux_target",
        "tmux_socket",
        "preset",
        "session_id",
        "poll_interval_s",
        "settings",
        "turn_state",
        "shutdown_requested_at",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class InsertRequest:
    """Rows to write atomically, with the checks that must hold in the same transaction."""

    messages: tuple[Message, ...]
    now: float
    nudges: tuple[tuple[str, str, str], ...] = ()  # (agent, message_id, reason)
    unread_max: int = 0  # 0: no cap
    rate_limit_max: int = 0  # 0: off
    rate_limit_window_s: float = 60.0
    idempotency: tuple[str, str, str] | None = None  # (sender, key, content hash)
    # Recipients whose registration is checked in the same transaction as the insert.
    check_recipients: tuple[str, ...] = ()
    refuse_unknown: bool = True
    # The loop guard: (content digest, window_s) collapses a repeat into the earlier send.
    collapse: tuple[str, float] | None = None
    thread_guard: ThreadGuard | None = None
    # (name, state) of recipients another registry knows (Overstory's sessions.db): its state
    # counts as much as ours (see ``checks.merged_state``).
    known_elsewhere: tuple[tuple[str, str], ...] = ()

    def state_elsewhere(self, name: str) -> str | None:
        return next((s for n, s in self.known_elsewhere if n == name), None)

    def check_recipient(self, name: str, ours: str | None) -> None:
        """Raise ``RecipientRefused`` when ``name`` (``ours``: its state in the store, None when
        unregistered) may not receive this send (``checks.recipient_refusal``)."""
        state = merged_state(ours, self.state_elsewhere(name))
        refusal = recipient_refusal(name, state, self.refuse_unknown)
        if refusal is not None:
            raise refusal


def with_outcome(record: Attempt | None, state: str) -> Attempt | None:
    """The history record of a release: ``dead`` when the release made the batch a dead letter."""
    if record is None or state != "dead":
        return record
    return replace(record, outcome="dead")


@dataclass(frozen=True, slots=True, kw_only=True)
class InsertResult:
    messages: tuple[Message, ...]
    duplicate: bool = False  # an idempotent repeat: nothing was written
    collapsed: bool = False  # a repeat inside the loop guard's window (also ``duplicate``)
    held: bool = False  # this send tripped the ping-pong cap: the hold and escalation were written


@dataclass(frozen=True, slots=True, kw_only=True)
class Released:
    state: str  # "pending" or "dead"
    failures: int
    messages: tuple[Message, ...] = ()  # filled when the batch went dead


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentProc:
    """One ``am_agent_procs`` row: an agent process (group leader) a daemon started."""

    pid: int
    start_time: str  # with pid, names the process (pids are reused)
    pgid: int
    agent: str
    delivery_id: str | None  # None for a long-lived (stdin) process
    daemon_pid: int
    started_at: float


class MailStore(abc.ABC):
    """Storage for mail, agents and delivery leases.

    Implementations: ``SqliteMailStore`` (the product), ``PostgresMailStore`` (teams across
    machines) and ``MemoryMailStore`` (a fake for tests); all pass
    ``tests/contract/test_store_contract.py``.
    """

    # The Overstory project this store belongs to (``overstory.link.OverstoryLink``), or None.
    overstory: Any = None
    # Where the store is: what callers use instead of asking which backend it has.
    location: StoreLocation

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        return None

    def change_mark(self) -> object | None:
        """A value that moves whenever another connection committed (``store.marks``); None
        (this default) when the store has none: a watcher must look every time."""
        return None

    # -- messages ---------------------------------------------------------------------------
    @abc.abstractmethod
    def insert(self, request: InsertRequest) -> InsertResult: ...

    @abc.abstractmethod
    def find_idempotent(self, sender: str, key: str, digest: str) -> InsertResult | None:
        """The messages an earlier send with this key wrote (``duplicate=True``), else None.

        Raises ``Conflict`` when the key was used for other content (another ``digest``).
        """

    @abc.abstractmethod
    def get_message(self, message_id: str) -> Message | None: ...

    def unread_among(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` name a stored message that is still unread (the loop's look for mail
        read elsewhere). A store a round trip away answers it in one query."""
        found = (self.get_message(i) for i in ids)
        return {m.id for m in found if m is not None and not m.read}

    @abc.abstractmethod
    def inbox(self, agent: str, *, unread_only: bool = False) -> list[Message]: ...

    @abc.abstractmethod
    def take_unread(self, agent: str, *, max_chars: int = 0, ack: bool = True) -> list[Message]:
        """Unread mail not in flight to the daemon, priority order; acked in the same transaction.

        ``max_chars`` > 0 stops before the running size would pass it (always at least one).
        With ``ack`` the messages come back read, and a ``booting`` agent becomes ``working``.
        """

    @abc.abstractmethod
    def ack(self, message_ids: Sequence[str], *, by: str = "pull") -> list[str]:
        """Mark read; returns the ids that were unread before (unknown ids are ignored)."""

    @abc.abstractmethod
    def list_messages(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        type: str | None = None,
        unread: bool | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Newest first."""

    @abc.abstractmethod
    def thread(self, thread_id: str) -> list[Message]: ...

    @abc.abstractmethod
    def purge(
        self, *, older_than: str | None = None, agent: str | None = None, everything: bool = False
    ) -> int: ...

    @abc.abstractmethod
    def reset_rate_limit(self, from_agent: str, to_agent: str) -> int: ...

    @abc.abstractmethod
    def sweep_orphans(self) -> int:
        """Delete our rows left naming messages that are gone (another tool, e.g. ``ov mail
        purge``, deleted them): nudges, finished deliveries, idempotency keys. Returns the count.

        Readers already ignore such rows; this keeps them from piling up (``purge`` and the
        daemon's hourly housekeeping call it).
        """

    @abc.abstractmethod
    def release_thread(self, thread_id: str) -> int:
        """Lift the loop guard's holds on ``thread_id`` and forget its count; returns the holds."""

    @abc.abstractmethod
    def take_overdue(
        self, after_s: dict[str, float], *, now: float, limit: int = 500
    ) -> list[Message]:
        """Unread mail older than ``after_s[priority]`` seconds (0 or missing: never), oldest
        first, not taken before; marked taken (and counted ``unread_escalated``) in the same
        transaction, so each message is returned once. Mail from agentmaild itself is never due.
        """

    @abc.abstractmethod
    def rule_counters(self) -> dict[str, int]:
        """The team rules' store-wide counters: ``collapsed``, ``unread_escalated`` (0 if none)."""

    @abc.abstractmethod
    def held_pairs(self, thread_id: str) -> set[str]:
        """The pairs (``checks.thread_pair``) the loop guard holds ``thread_id`` for."""

    # -- the store's settings (schema 8; PostgreSQL 10) ---------------------------------------
    @abc.abstractmethod
    def team_rules(self) -> dict[str, Any]:
        """The team rules its daemon last wrote (``config.TEAM_RULES`` → value); {} when none
        was written: then the built-in defaults apply (``config.team_limits``)."""

    @abc.abstractmethod
    def set_team_rules(self, rules: Mapping[str, Any], *, now: float) -> bool:
        """Keep ``rules`` as the team's (replacing what was kept); True when they changed."""

    @abc.abstractmethod
    def take_nudges(self, agent: str) -> list[dict[str, Any]]:
        """The priority markers queued for ``agent`` whose message is still unread; clears them."""

    # -- agents -----------------------------------------------------------------------------
    @abc.abstractmethod
    def add_agent(self, agent: Agent) -> Agent: ...

    @abc.abstractmethod
    def get_agent(self, name: str) -> Agent | None: ...

    @abc.abstractmethod
    def list_agents(self) -> list[Agent]: ...

    @abc.abstractmethod
    def update_agent(self, name: str, changes: dict[str, Any]) -> Agent: ...

    @abc.abstractmethod
    def set_agent_state(self, name: str, state: str, *, force: bool = False) -> Agent: ...

    @abc.abstractmethod
    def remove_agent(self, name: str) -> None: ...

    # -- deliveries -------------------------------------------------------------------------
    @abc.abstractmethod
    def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        """Lease the next batch: the agent's pending redelivery first (same id), else its new
        mail in order; else, for a member of work queues that may take work (not completed or
        zombie, no shutdown requested), a pending queue delivery of one of its queues (same id,
        attempt + 1, now held by this agent), else one new message to one of its queues."""

    @abc.abstractmethod
    def ack_delivery(self, delivery_id: str, *, now: float, record: Attempt | None = None) -> int:
        """Mark the batch's messages read; returns how many were newly acked.

        ``record`` goes to the delivery history in the same transaction; a record that cannot be
        written is dropped (and logged), never the ack. Mail reached the agent: a ``booting``
        registration becomes ``working`` (no other state changes).
        """

    @abc.abstractmethod
    def release(
        self,
        delivery_id: str,
        *,
        error: str,
        max_attempts: int,
        now: float,
        count: int = 1,
        record: Attempt | None = None,
    ) -> Released:
        """Give a claimed batch back; ``count`` failures are recorded (0 for a clean release).

        ``record`` goes to the delivery history as ``ack_delivery``'s does, its outcome turned to
        ``dead`` when this release made the batch a dead letter.
        """

    @abc.abstractmethod
    def extend_lease(self, delivery_id: str, *, lease_s: float, now: float) -> bool: ...

    @abc.abstractmethod
    def reap_expired(
        self,
        *,
        now: float,
        everything: bool = False,
        host: str | None = None,
        agent: str | None = None,
    ) -> list[tuple[str, str]]:
        """Re-queue claims whose lease ended (all claims with ``everything``, as at daemon start;
        with ``host`` too, "all" means those of the agents of that host or of any host). With
        ``agent``, only that agent's claims (a loop restarted after a claim whose answer was lost).

        Returns (delivery_id, agent) pairs; the delivery ids are kept for the redelivery.
        """

    @abc.abstractmethod
    def dead_letters(self, agent: str | None = None) -> list[DeadLetter]: ...

    @abc.abstractmethod
    def retry_dead(
        self, *, agent: str | None = None, delivery_id: str | None = None
    ) -> list[str]: ...

    @abc.abstractmethod
    def pending_agents(self) -> set[str]:
        """Agents with mail the daemon could claim now."""

    @abc.abstractmethod
    def counts(self) -> dict[str, AgentCounts]: ...

    @abc.abstractmethod
    def totals(self) -> dict[str, int]:
        """Store-wide figures: messages, unread."""

    # -- work queues ------------------------------------------------------------------------
    @abc.abstractmethod
    def join_queue(self, queue: str, agent: str) -> None:
        """Make ``agent`` (registered, else ``NotFound``) a member of ``queue``; idempotent."""

    @abc.abstractmethod
    def leave_queue(self, queue: str, agent: str) -> bool:
        """False when it was no member. Removing an agent also ends its memberships."""

    @abc.abstractmethod
    def queue_members(self, queue: str) -> list[str]: ...

    @abc.abstractmethod
    def queues(self) -> list[QueueInfo]:
        """Every queue with a member or with mail waiting, by name."""

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
