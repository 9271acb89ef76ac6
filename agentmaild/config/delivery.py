"""The ``[delivery]`` section: how mail reaches an agent whose turn is running.

Only the standard library: the CLI loads this on every command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentmaild.config.fields import Section

# store.midturn.POLICIES: "high" lets urgent and high mail into a running turn (between its tool
# calls), "urgent" only urgent, "all" everything, "none" nothing (all mail waits for the turn's end)
MidTurnPriority = Literal["high", "urgent", "all", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryConfig(Section):
    # An agent's own ``mid_turn_priority`` setting (agents add|update --mid-turn-priority) wins.
    mid_turn_priority: MidTurnPriority = "high"
