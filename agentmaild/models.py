"""Value types shared by every part of agentmaild: messages, agents, batches and their enums.

The team-member and execution status vocabularies are ``models_status``.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from agentmaild.ids import iso_now
from agentmaild.mail import vocab
from agentmaild.models_status import MEMBER_OF_STATE, MemberStatus


class MessageType(enum.StrEnum):
    STATUS = "status"
    QUESTION = "question"
    RESULT = "result"
    ERROR = "error"
    WORKER_DONE = "worker_done"
    WORKER_DIED = "worker_died"
    MERGE_READY = "merge_ready"
    MERGED = "merged"
    MERGE_FAILED = "merge_failed"
    ESCALATION = "escalation"
    HEALTH_CHECK = "health_check"
    DISPATCH = "dispatch"
    ASSIGN = "assign"
    DECISION_GATE = "decision_gate"
    INTERRUPT = "interrupt"


SEMANTIC_TYPES = frozenset(vocab.SEMANTIC_TYPES)
PROTOCOL_TYPES = frozenset(vocab.PROTOCOL_TYPES)
assert tuple(t.value for t in MessageType) == vocab.MESSAGE_TYPES


class Priority(enum.StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    URGENT = "urgent"


# Delivery order: urgent first. Used by claims and by the pull-side `check`.
PRIORITY_RANK = {"urgent": 0, "high": 1, "normal": 2, "low": 3}


class AgentState(enum.StrEnum):
    BOOTING = "booting"
    WORKING = "working"
    IDLE = "idle"
    STALLED = "stalled"
    COMPLETED = "completed"
    ZOMBIE = "zombie"


# The guarded transition table: state -> states it may move to.
STATE_TRANSITIONS: dict[str, frozenset[str]] = {
    "booting": frozenset({"working", "idle", "stalled", "completed", "zombie"}),
    "working": frozenset({"idle", "stalled", "completed", "zombie"}),
    "idle": frozenset({"working", "stalled", "completed", "zombie"}),
    "stalled": frozenset({"working", "idle", "completed", "zombie"}),
    "completed": frozenset({"booting", "zombie"}),
    "zombie": frozenset({"booting"}),
}

# Recipients in these states are refused by send and reply (``store.checks``).
REFUSED_STATES = vocab.REFUSED_STATES


class ChannelKind(enum.StrEnum):
    PULL = "pull"
    SPAWN = "spawn"
    STDIN = "stdin"
    TMUX = "tmux"


KNOWN_CAPABILITIES = (
    "coordinator",
    "orchestrator",
    "lead",
    "supervisor",
    "scout",
    "builder",
    "reviewer",
    "merger",
    "monitor",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    id: str
    from_agent: str
    to_agent: str
    subject: str
    body: str
    type: str = "status"
    priority: str = "normal"
    thread_id: str | None = None
    payload: str | None = None
    read: bool = False
    created_at: str = ""
    broadcast_id: str | None = None
    delivery_id: str | None = None
    # When and by what the message was marked read: a delivery id (the daemon's batch), "pull"
    # (check, hooks) or whatever `ack` was told.
    acked_at: str | None = None
    acked_by: str | None = None

    @property
    def size(self) -> int:
        return len(self.subject) + len(self.body) + len(self.payload or "")

    def payload_obj(self) -> Any:
        return json.loads(self.payload) if self.payload else None

    def summary(self) -> dict[str, Any]:
        """Probe-phase metadata: never the body."""
        return {
            "id": self.id,
            "from": self.from_agent,
            "to": self.to_agent,
            "type": self.type,
            "priority": self.priority,
            "subject": self.subject,
            "created_at": self.created_at,
            "size": self.size,
            "read": self.read,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "body": self.body,
            "thread_id": self.thread_id,
            "payload": self.payload_obj(),
            "broadcast_id": self.broadcast_id,
            "delivery_id": self.delivery_id,
            "acked_by": self.acked_by,
            "acked_at": self.acked_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    name: str
    capability: str
    parent: str | None = None
    state: str = "booting"
    channel: str = "pull"
    command: tuple[str, ...] | None = None
    cwd: str | None = None
    tmux_target: str | None = None
    tmux_socket: str | None = None
    preset: str | None = None
    session_id: str | None = None
    poll_interval_s: float | None = None
    # Per-agent channel settings that have no column of their own (ack_on, stall_timeout_s, ...).
    settings: dict[str, Any] = field(default_factory=dict)
    turn_state: str | None = None
    turn_state_at: str | None = None
    shutdown_requested_at: str | None = None  # the member status shutdown_requested, when set
    host: str | None = None  # the host whose daemon delivers to it; None: any host
    created_at: str = ""
    updated_at: str = ""

    @property
    def member_status(self) -> str:
        if self.shutdown_requested_at and self.state not in REFUSED_STATES:
            return MemberStatus.SHUTDOWN_REQUESTED.value
        return MEMBER_OF_STATE.get(self.state, MemberStatus.ERROR.value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "capability": self.capability,
            "parent": self.parent,
            "state": self.state,
            "channel": self.channel,
            "command": list(self.command) if self.command is not None else None,
            "cwd": self.cwd,
            "tmux_target": self.tmux_target,
            "tmux_socket": self.tmux_socket,
            "preset": self.preset,
            "session_id": self.session_id,
            "poll_interval_s": self.poll_interval_s,
            "settings": self.settings,
            "turn_state": self.turn_state,
            "turn_state_at": self.turn_state_at,
            "shutdown_requested_at": self.shutdown_requested_at,
            "host": self.host,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """Messages claimed together under one delivery id (stable across redeliveries)."""

    delivery_id: str
    agent: str
    messages: tuple[Message, ...]
    attempt: int = 1  # 1 on first delivery; > 1 marks a redelivery
    lease_until: float = 0.0

    @property
    def redelivery(self) -> bool:
        return self.attempt > 1

    @property
    def message_ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.messages)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    delivery_id: str
    agent: str
    message_ids: tuple[str, ...]
    attempts: int
    last_error: str | None
    dead_at: str


# What a finished delivery attempt came to, as the delivery history (``am_attempts``) records it.
# ``interrupted``: the turn was stopped by an interrupt (the batch is redelivered); ``mid-turn``:
# handed to a running turn between tool calls (``store.midturn``) and taken there.
ATTEMPT_OUTCOMES = ("acked", "failed", "unavailable", "dead", "released", "interrupted", "mid-turn")


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One finished delivery attempt: a row of the delivery history (``agentmaild deliveries``)."""

    delivery_id: str
    agent: str
    message_ids: tuple[str, ...]
    attempt: int  # 1 on first delivery, as in ``Batch.attempt``
    outcome: str  # one of ATTEMPT_OUTCOMES
    error: str | None = None
    duration_s: float | None = None
    at: float = 0.0  # unix seconds, when the attempt ended
    id: int = 0  # assigned by the store; later attempts have larger ids

    def to_dict(self) -> dict[str, Any]:
        return {
            "delivery_id": self.delivery_id,
            "agent": self.agent,
            "message_ids": list(self.message_ids),
            "attempt": self.attempt,
            "outcome": self.outcome,
            "error": self.error,
            "duration_s": self.duration_s,
            "at": iso_now(self.at),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCounts:
    """Per-agent figures for `status`."""

    agent: str
    unread: int = 0
    in_flight: int = 0
    dead_letters: int = 0


QUEUE_PREFIX = "queue:"  # `send --to queue:NAME`: one member of the work queue NAME per attempt


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInfo:
    """One work queue for `status`: its members, the mail waiting, and who holds what."""

    name: str
    members: tuple[str, ...] = ()
    depth: int = 0  # mail waiting for a member (new, or given back for a redelivery)
    held: tuple[tuple[str, str, int], ...] = ()  # (agent, delivery id, attempt) in flight

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "members": list(self.members),
            "depth": self.depth,
            "held": [{"agent": a, "delivery_id": d, "attempt": n} for a, d, n in self.held],
        }
