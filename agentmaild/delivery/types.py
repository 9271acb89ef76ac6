"""The delivery loop's vocabulary: step results, per-agent loop settings, an attempt's outcome."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agentmaild.models import Agent

if TYPE_CHECKING:
    from agentmaild.config import DaemonConfig

Clock = Callable[[], float]


class StepResult(enum.StrEnum):
    BUSY = "busy"  # the agent cannot take mail now; nothing claimed
    IDLE = "idle"  # nothing to claim
    DELIVERED = "delivered"  # the channel confirmed; acked
    FAILED = "failed"  # the channel did not confirm; released with one failure
    DEAD = "dead"  # that failure was the last allowed: dead letters, NDR sent
    TIMEOUT = "timeout"  # deliver_timeout_s passed; released with one failure
    CANCELLED = "cancelled"  # abort() during delivery; released without a failure
    INTERRUPTED = "interrupted"  # an interrupt stopped the turn; released without a failure
    UNAVAILABLE = "unavailable"  # the agent cannot take mail at all; released, backing off
    PAUSED = "paused"  # paused or stopping: nothing claimed
    BACKOFF = "backoff"  # still backing off after a failure: nothing claimed


# The delivery history's outcome of each settled result; the release turns it to "dead" when the
# failure was the last allowed.
HISTORY_OUTCOMES: dict[StepResult, str] = {
    StepResult.DELIVERED: "acked",
    StepResult.FAILED: "failed",
    StepResult.TIMEOUT: "failed",
    StepResult.UNAVAILABLE: "unavailable",
    StepResult.CANCELLED: "released",
    StepResult.INTERRUPTED: "interrupted",
    StepResult.BUSY: "released",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopSettings:
    poll_interval_s: float = 2.0
    lease_s: float = 300.0
    batch_max_messages: int = 20
    batch_max_chars: int = 10000
    max_attempts: int = 5
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 300.0
    backoff_jitter: float = 0.2
    busy_warn_after_s: float = 600.0  # a busy spell this long is "stuck" (status, one warning)
    deliver_timeout_s: float | None = None  # None: the channel's own stall handling decides

    @classmethod
    def from_config(cls, daemon: DaemonConfig, agent: Agent | None = None) -> LoopSettings:
        settings = cls(
            poll_interval_s=daemon.poll_interval_s,
            lease_s=daemon.lease_s,
            batch_max_messages=daemon.batch_max_messages,
            batch_max_chars=daemon.batch_max_chars,
            max_attempts=daemon.max_attempts,
            backoff_initial_s=daemon.backoff_initial_s,
            backoff_max_s=daemon.backoff_max_s,
            backoff_jitter=daemon.backoff_jitter,
            busy_warn_after_s=daemon.busy_warn_after_s,
        )
        if agent is None:
            return settings
        timeout = agent.settings.get("deliver_timeout_s")
        return replace(
            settings,
            poll_interval_s=agent.poll_interval_s or settings.poll_interval_s,
            deliver_timeout_s=float(timeout) if isinstance(timeout, int | float) else None,
        )


@dataclass(slots=True)
class Outcome:
    """What one delivery attempt came to, before its bookkeeping."""

    result: StepResult
    error: str | None = None


# After these results run() steps again at once: there may be more mail waiting.
_AGAIN = frozenset({StepResult.DELIVERED, StepResult.DEAD, StepResult.INTERRUPTED})
_BACKING_OFF = frozenset(
    {StepResult.FAILED, StepResult.TIMEOUT, StepResult.UNAVAILABLE, StepResult.BACKOFF}
)


def wait_after(
    result: StepResult, *, more: bool, backoff_left_s: float, gated: bool, poll_interval_s: float
) -> float | None:
    """How long ``run()`` waits after a step: 0 steps again, None waits for a wake-up only."""
    if result is StepResult.DELIVERED and not more:
        result = StepResult.IDLE  # the claim left nothing behind: an empty claim would say so
    if result in _AGAIN:
        return 0
    if result in _BACKING_OFF:
        return backoff_left_s
    if result is StepResult.PAUSED or (result is StepResult.IDLE and gated):
        return None
    return poll_interval_s
