"""The records the ``MailStore`` takes and returns: what a call carries, not what a store must do.

``InsertRequest`` (a send's rows with the checks that must hold in its transaction) and its
``InsertResult``; ``Released`` (a batch given back); ``AgentProc`` (one row of the process journal);
``AGENT_MUTABLE_FIELDS`` (what ``update_agent`` may change); ``with_outcome`` (a release's history
record). The contract itself is ``store.base.MailStore``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agentmaild.models import Attempt, Message
from agentmaild.store.checks import merged_state, recipient_refusal
from agentmaild.store.guard import ThreadGuard

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
