"""The status words of the agent-team design: a member's status and an agent's execution status,
and how our registry, loop and turn states map onto them (docs/guides/team-rules.md)."""

from __future__ import annotations

import enum


class MemberStatus(enum.StrEnum):
    """The coarse team-member status of the agent-team design, mapped onto ``AgentState``."""

    READY = "ready"
    BUSY = "busy"
    SHUTDOWN_REQUESTED = "shutdown_requested"
    SHUTDOWN = "shutdown"
    ERROR = "error"


# Our registry state as a member status (``shutdown_requested`` is a flag on top: the agent keeps
# its state until it shuts down).
MEMBER_OF_STATE: dict[str, str] = {
    "booting": "ready",
    "idle": "ready",
    "working": "busy",
    "stalled": "error",
    "completed": "shutdown",
    "zombie": "error",
}
# The state a member status is stored as, from a live state / from completed or zombie.
STATE_OF_MEMBER: dict[str, tuple[str, str]] = {
    "ready": ("idle", "booting"),
    "busy": ("working", "booting"),
    "shutdown": ("completed", "completed"),
    "error": ("stalled", "zombie"),
}
# The guarded member transitions (``agents set-state NAME ready|busy|…``; --force skips them).
MEMBER_TRANSITIONS: dict[str, frozenset[str]] = {
    "ready": frozenset({"busy", "shutdown_requested", "shutdown", "error"}),
    "busy": frozenset({"ready", "shutdown_requested", "shutdown", "error"}),
    "shutdown_requested": frozenset({"ready", "shutdown", "error"}),
    "shutdown": frozenset({"ready"}),
    "error": frozenset({"ready", "busy", "shutdown"}),
}


class ExecutionStatus(enum.StrEnum):
    """The fine execution status: what the agent's prompt loop is doing right now."""

    IDLE = "idle"  # waiting for input
    RUNNING = "running"  # in a turn (a delivery in flight, or its session says busy)
    WAITING = "waiting"  # stopped at a question for a human (a permission prompt)
    RETRYING = "retrying"  # backing off after a failed delivery
    PAUSED = "paused"
    STOPPED = "stopped"  # its loop stopped, or its session is gone
    UNKNOWN = "unknown"  # a pull agent whose session never reported


# The delivery loop's state, then the turn state the hooks report, as an execution status.
EXEC_OF_LOOP: dict[str, str] = {
    "idle": "idle",
    "delivering": "running",
    "busy": "running",
    "backoff": "retrying",
    "paused": "paused",
    "stopping": "stopped",
    "stopped": "stopped",
}
EXEC_OF_TURN: dict[str, str] = {
    "idle": "idle",
    "busy": "running",
    "waiting": "waiting",
    "gone": "stopped",
}
