"""The send's checks: each rule's decision and its error text, once.

Every store (memory, SQLite, PostgreSQL) and every front door asks here; none restates a rule
or an error's words. A decision is a small pure function of what a store read (its own way:
dicts, SQL rows); the store only reads and writes. Where a decision must also run inside SQL
(SQLite's ``send_probe`` read, PostgreSQL's ``am_send_one``), the function's docstring names its
SQL twin and ``tests/contract/test_rule_twins.py`` proves both agree on the same inputs.

Imports only ``errors`` and ``vocab`` (stdlib-only): the hook's hot path (``fast``) asks
``is_known`` here without loading the models.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from agentmaild.errors import Conflict, InboxFull, LoopHeld, RateLimited, RecipientRefused
from agentmaild.mail.vocab import IMPLICIT_RECIPIENTS, REFUSED_STATES

# -- windows (rate limit, repeat collapse, thread guard) ---------------------------------------


def window_start(now: float, window_s: float) -> float:
    """The instant a window of ``window_s`` ending ``now`` starts after (exclusive).

    Every windowed rule counts what happened strictly after it (``at > start``; the SQL twins
    are the ``at > ?`` of ``rate_count``, ``recent_send_get``, ``thread_log_count``, the first
    column of ``send_probe`` and ``am_send_one``'s ``v_at > p_since``).
    """
    return now - window_s


def in_window(at: float | None, now: float, window_s: float) -> bool:
    """Whether an event ``at`` (None: none) lies in the window ending ``now``."""
    return at is not None and at > window_start(now, window_s)


# -- recipient refusal ---------------------------------------------------------------------------


def ended(state: str | None) -> bool:
    """Whether an agent in ``state`` will never read mail again: refused as a recipient, left
    out of a group send (SQL twin: ``am_send_one``'s ``v_state = ANY (p_refused)``)."""
    return state in REFUSED_STATES


def merged_state(ours: str | None, theirs: str | None) -> str | None:
    """One agent's state over two registries: terminal if either says so, else ours, else theirs.

    Either tool may have ended the agent (Overstory's ``completed``, our ``agents set-state``), and
    mail to an ended agent is never read, whoever sends it.
    """
    for state in (ours, theirs):
        if ended(state):
            return state
    return ours if ours is not None else theirs


def recipient_refusal(
    name: str, state: str | None, refuse_unknown: bool
) -> RecipientRefused | None:
    """Why ``name`` (in ``state``, None when unregistered) may not receive mail, if it may not.

    SQL twin: ``am_send_one`` (``sql/pg_schema_9.sql``) answers 'slow' for the same recipients
    (``v_state IS NULL AND p_refuse_unknown``, ``v_state = ANY (p_refused)``), and the general
    send then raises this. SQLite's ``send_probe`` only reads the state; the decision is here.
    """
    if state is None:
        if not refuse_unknown:
            return None
        return RecipientRefused(
            f"unknown recipient {name!r}: register it with `agentmaild agents add` "
            "or check `agentmaild agents list`"
        )
    if ended(state):
        return RecipientRefused(f"recipient {name} is {state}: it will never read this mail")
    return None


# -- unread cap ----------------------------------------------------------------------------------


def unread_cap_reached(unread: int, cap: int) -> bool:
    """Whether an inbox holding ``unread`` unread messages takes no more under ``cap`` (0: none).

    SQL twins: ``unread_count_reaches`` (a row when at least ``cap`` are unread), the third
    column of ``send_probe`` and ``am_send_one``'s ``EXISTS (... OFFSET p_unread_max - 1)``.
    """
    return cap > 0 and unread >= cap


def inbox_full(to: str, cap: int) -> InboxFull:
    return InboxFull(f"inbox of {to} is full ({cap} unread); retry once it reads its mail")


# -- rate limit ----------------------------------------------------------------------------------


def rate_trim_before(now: float, window_s: float) -> float:
    """Rate-log rows at or before this are dropped: kept one window longer than counted, so
    ``reset_rate_limit`` reports the same rows on every store."""
    return window_start(now, 2 * window_s)


def rate_limited(
    sender: str, to: str, sent: int, max_sends: int, window_s: float
) -> RateLimited | None:
    """The refusal of a send ``sender``→``to`` that already sent ``sent`` in the window, if
    ``max_sends`` (0: off) says so. The store counts with ``window_start`` (``rate_count``)."""
    if max_sends <= 0 or sent < max_sends:
        return None
    return RateLimited(
        f"rate limit: {sender}→{to} sent {sent} messages in the "
        f"last {window_s:g}s (max {max_sends})"
    )


# -- repeat collapse -----------------------------------------------------------------------------


def collapses(earlier_at: float | None, now: float, window_s: float) -> bool:
    """Whether a send repeats the earlier one with its digest (sent ``earlier_at``, None: never)
    inside the loop guard's window. A repeat whose earlier messages are all gone is new.

    SQL twins: ``recent_send_get``, the first column of ``send_probe``, ``am_send_one``'s
    ``v_at > p_since`` (all ``at > window_start``).
    """
    return in_window(earlier_at, now, window_s)


# -- thread guard (the ping-pong cap) ------------------------------------------------------------


def trips_thread_cap(seen: int, max_messages: int) -> bool:
    """Whether a send on a thread that already carried ``seen`` messages between the pair in
    the window (counted with ``window_start``: ``thread_log_count``) trips the cap."""
    return seen >= max_messages


def thread_pair(a: str, b: str) -> str:
    """The pair the thread guard counts and holds: the two agents, sorted, joined by ``|``."""
    return "|".join(sorted((a, b)))


def held_pair(held: Collection[str], sender: str, recipients: Iterable[str]) -> str | None:
    """The pair of ``held`` (the pairs a thread is held for) that a send on the thread from
    ``sender`` to ``recipients`` falls under, if any: every send between a held pair on its
    thread is refused (``held_error``), a group send and a send carrying no guard included."""
    return next((p for p in (thread_pair(sender, r) for r in recipients) if p in held), None)


def held_error(thread_id: str, pair: str) -> LoopHeld:
    a, _, b = pair.partition("|")
    return LoopHeld(
        f"loop guard (limits.pingpong_max): thread {thread_id} between {a} and {b} is held; "
        f"`agentmaild limits reset --thread {thread_id}` releases it"
    )


# -- idempotency ---------------------------------------------------------------------------------


def idempotency_conflict(sender: str, key: str, stored: str, digest: str) -> Conflict | None:
    """The refusal of a send reusing ``key`` (stored with content hash ``stored``) for other
    content (``digest``); None when it is a retry of the same send."""
    if stored == digest:
        return None
    return Conflict(f"idempotency key {key!r} was already used by {sender} for other content")


def replays(earlier: Collection[object]) -> bool:
    """Whether an earlier send with the key is answered again: only while one of its messages
    is left (every one deleted since: the key is free, and dropped)."""
    return bool(earlier)


# -- known agents (reading mail as a name) ------------------------------------------------------


def is_known(
    name: str,
    *,
    lookups: Iterable[Callable[[], object]] = (),
    refuse_unknown: bool | Callable[[], bool],
    implicit: Collection[str] = IMPLICIT_RECIPIENTS,
) -> bool:
    """Whether mail may be read as ``name``: an implicit name (``operator``), one the ``lookups``
    know (registered here or in another registry, ever mailed), or any name at all when
    ``limits.refuse_unknown_recipients`` is off (then none is unknown, as no recipient is).

    Each asked only while none has said yes; a callable ``refuse_unknown`` is called last, so
    the hook's hot path loads the config only for a name nobody knows. Not
    known: ``errors.UnknownAgent(name)``.
    """
    if name in implicit or refuse_unknown is False or any(look() for look in lookups):
        return True
    return not (refuse_unknown() if callable(refuse_unknown) else refuse_unknown)
