"""The loop guard's part of an insert: the ping-pong cap a send carries, the counters.

A record an ``InsertRequest`` (``records``) carries, kept in a module of its own because the SQL
stores' loop-guard parts read ``PRUNE_EVERY`` from it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentmaild.models import Message

# The loop guard forgets expired sends once per this many sends, not on every one (issue 15).
PRUNE_EVERY = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadGuard:
    """The loop guard's ping-pong cap for one send, checked and counted in its transaction.

    More than ``max_messages`` between the two agents of ``pair`` on ``thread_id`` inside
    ``window_s`` holds the thread for the pair: the send that trips it writes the hold and
    ``escalation`` (once) instead of its message; later sends are refused with ``LoopHeld``
    (``checks.trips_thread_cap``, ``checks.held_error``).
    """

    thread_id: str
    pair: str  # the two agents, sorted, joined by "|"
    max_messages: int
    window_s: float
    escalation: Message


# The counters ``rule_counters`` reports (each 0 until the rule first fires).
RULE_COUNTERS = ("collapsed", "unread_escalated")
