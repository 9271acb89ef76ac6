"""Why an agent takes no mail now: its busy spell (since when, why; warned about once), else
paused, unavailable or backing off — the `status` REASON column.

A spell starts when the channel first says busy or a delivery starts (each delivery is a spell of
its own: "in turn"), keeps its start while the agent stays busy, and ends at the next step that
finds it free (or when the delivery settles).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class BusySpell:
    reason: str | None = None
    since: float | None = None  # on the loop's monotonic clock
    warned: bool = False

    def busy(self, reason: str, now: float, *, fresh: bool = False) -> None:
        if self.since is None or fresh:
            self.since, self.warned = now, False
        self.reason = reason

    def clear(self) -> None:
        self.reason, self.since, self.warned = None, None, False

    def length(self, now: float) -> float | None:
        return None if self.since is None else max(0.0, now - self.since)

    def overdue(self, now: float, warn_after_s: float) -> bool:
        """True once per spell: the first time it is seen to last ``warn_after_s``."""
        length = self.length(now)
        if length is None or self.warned or length < warn_after_s:
            return False
        self.warned = True
        return True


def why_not(
    spell: BusySpell,
    *,
    paused: bool,
    backoff_s: float,
    last: dict[str, Any] | None,
    last_error: str | None,
) -> str | None:
    """A few words on why no mail goes in now; None when nothing holds it back."""
    if spell.reason is not None:
        return spell.reason
    if paused:
        return "paused"
    if backoff_s <= 0:
        return None
    if (last or {}).get("result") == "unavailable":
        return f"unavailable: {last_error}"
    return "backoff"
