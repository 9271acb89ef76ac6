"""The supervisor's per-agent bookkeeping: one entry per agent, pause/resume, drain, the snapshot.

``Roster`` is the base of ``Supervisor``: it holds the entries (an agent's current loop, its
crashes and the counters of loops it ran before) and the paused names, and answers for them;
the supervisor starts, restarts and stops the loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.errors import AgentUnavailable, NotFound
from agentmaild.models import Agent

COUNTERS = ("delivered_total", "failed_total", "dead_total")


@dataclass(eq=False)
class Entry:
    agent: Agent
    loop: DeliveryLoop | None = None
    retired: bool = False
    crashes: int = 0
    last_crash: str | None = None
    requeue: bool = False  # re-queue the agent's claims before its next loop (_requeue_own)
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    kick: anyio.Event = field(default_factory=anyio.Event)

    def halt(self, abandon: str | None = None) -> None:
        """Stop the loop; with ``abandon`` (a reason) cancel its delivery in flight too."""
        if self.loop is not None:
            if abandon is None:
                self.loop.stop()
            else:
                self.loop.abort(abandon)
        self.kick.set()


def in_flight_of(entry: Entry) -> str | None:
    loop = entry.loop
    return loop.in_flight.delivery_id if loop is not None and loop.in_flight else None


def _crash_reason(entry: Entry) -> str | None:
    """A loop that cannot run: its channel could not be built (unavailable) or it crashed."""
    crash = entry.last_crash
    if crash is None:
        return None
    kind, _, message = crash.partition(": ")
    return f"unavailable: {message}" if kind == AgentUnavailable.__name__ else f"crashed: {crash}"


class Roster:
    """The entries by agent name, and which of them are paused."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._paused: set[str] = set()
        self._all_paused = False

    def pause(self, agent: str | None = None) -> list[str]:
        targets = self._targets(agent)
        if agent is None:
            self._all_paused = True
        else:
            self._paused.add(agent)
        for name in targets:
            loop = self._entries[name].loop
            if loop is not None:
                loop.pause()
        return targets

    def resume(self, agent: str | None = None) -> list[str]:
        targets = self._targets(agent)
        if agent is None:
            self._all_paused = False
            self._paused.clear()
        else:
            self._paused.discard(agent)
        for name in targets:
            loop = self._entries[name].loop
            if loop is not None and not (self._all_paused and agent is not None):
                loop.resume()
        return targets

    def _targets(self, agent: str | None) -> list[str]:
        if agent is None:
            return sorted(self._entries)
        if agent not in self._entries:
            raise NotFound(f"no delivery loop for {agent!r} (unknown agent, or channel pull)")
        return [agent]

    async def drain(self, timeout_s: float) -> dict[str, Any]:
        """Pause every loop and wait up to ``timeout_s`` for deliveries in flight to settle."""
        self.pause()
        with anyio.move_on_after(timeout_s):
            for entry in list(self._entries.values()):
                if entry.loop is not None:
                    await entry.loop.quiet.wait()
        in_flight = self.in_flight()
        return {"drained": not in_flight, "in_flight": in_flight}

    def in_flight(self) -> list[str]:
        return sorted(
            e.loop.in_flight.delivery_id
            for e in self._entries.values()
            if e.loop is not None and e.loop.in_flight is not None
        )

    # -- figures ----------------------------------------------------------------------------
    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per-agent loop figures for ``status`` and ``metrics``."""
        out: dict[str, dict[str, Any]] = {}
        for name, entry in sorted(self._entries.items()):
            loop = entry.loop
            row: dict[str, Any] = (
                loop.snapshot()
                if loop is not None
                else {
                    "state": "restarting" if entry.crashes else "starting",
                    "busy": False,
                    "busy_reason": _crash_reason(entry),
                    "busy_for_s": None,
                    "stuck": False,
                }
            )
            for key in COUNTERS:
                row[key] = entry.totals[key] + (getattr(loop, key) if loop is not None else 0)
            row.update(
                channel=entry.agent.channel,
                paused=self._all_paused or name in self._paused,
                crashes=entry.crashes,
                last_crash=entry.last_crash,
                channel_info=loop.channel.describe() if loop is not None else {},
            )
            out[name] = row
        return out

    @property
    def agents(self) -> list[str]:
        return sorted(self._entries)
