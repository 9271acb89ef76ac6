"""The MailStore ABC: every operation on mail, agents and deliveries, each one transaction.

The contract is this class and the ledgers it inherits (``ledgers.Ledgers``: processes, tokens,
peers, history); the records its calls take and return are in ``records``. Besides the abstract
operations it declares the daemon's offers, with the behaviour of a store that lacks them:
``run_inline`` and ``run_grouped`` (how ``AsyncMailStore`` runs calls: ``store.hops``),
``open_looks`` (a look for mail read elsewhere off the store's thread: ``store.looks``) and
``more_after`` (whether a claim left mail behind).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from agentmaild.models import Agent, AgentCounts, Attempt, Batch, DeadLetter, Message, QueueInfo
from agentmaild.store.ledgers import Ledgers
from agentmaild.store.location import StoreLocation
from agentmaild.store.records import InsertRequest, InsertResult, Released

if TYPE_CHECKING:  # the daemon's machinery: never loaded on the CLI's paths
    from agentmaild.store.hops import Runnable
    from agentmaild.store.looks import Looks

T = TypeVar("T")


class MailStore(Ledgers):
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

    # -- the daemon's offers (``AsyncMailStore``); these defaults are a store without them ------
    # Ids of batches whose claim saw nothing else claimable for the agent, noted after commit by a
    # store that can tell (SQLite, PostgreSQL); ``more_after`` takes each out. Every store sets
    # its own (empty) set in ``__init__``; one that cannot tell leaves it empty.
    drained: set[str]

    def more_after(self, delivery_id: str) -> bool:
        """Whether more may be claimable once the batch ``delivery_id`` settles: False only when
        its claim saw nothing else, and only the first time it is asked; True when unknown."""
        if delivery_id not in self.drained:
            return True
        self.drained.discard(delivery_id)
        return False

    # Agents whose last claim left waiting queue work to members ahead in the queue's turn, and
    # in how many seconds each should claim again; a store that never defers leaves it empty.
    deferred: dict[str, float]

    def retry_after(self, agent: str) -> float | None:
        """After a claim that gave nothing: in how many seconds ``agent`` should claim again
        (taken out of ``deferred``, once); None: wait for a wake-up."""
        return self.deferred.pop(agent, None)

    def run_inline(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (one short write) now, in the caller's thread, when it needs no wait; else
        answer ``NOT_NOW`` having written nothing. This default always answers ``NOT_NOW``: every
        call takes its hop to the store's thread."""
        from agentmaild.store.notnow import NOT_NOW

        return NOT_NOW  # type: ignore[no-any-return]

    def run_grouped(self, calls: Sequence[Runnable]) -> None:
        """Run ``calls`` (store calls that never raise) in one transaction where the store can
        (SQLite: group commit). This default runs each on its own, in order."""
        for call in calls:
            call.run()

    def open_looks(self) -> Looks | None:
        """A read-only look for mail read elsewhere, answered off the store's thread (SQLite's
        own connection); None, this default, when the store's ``unread_among`` is the look."""
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
    def attach_to_delivery(self, message_id: str, delivery_id: str, agent: str) -> bool:
        """Put unread, unclaimed mail of ``agent`` into its claimed delivery (an interrupt's)."""

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
