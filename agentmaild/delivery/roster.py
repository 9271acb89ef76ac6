"""The supervisor's per-agent bookkeeping: one entry per agent, pause/resume, drain, the snapshot.

``Roster`` is the base of ``Supervisor``: it holds the entries (an agent's current loop, its
crashes and the counters of loops it ran before) and the paused names; it answers for them and
wakes, retries and stops their loops. The supervisor starts, restarts and ticks the loops.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from agentmaild.delivery.interrupt import interrupt_turn
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
    """The entries by agent name, which of them are paused, and the sync controls (``wake``,
    ``retry``, ``stop``, ``abort``) that reach the loops and poke the supervisor's tick."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._paused: set[str] = set()
        self._all_paused = False
        self._poke = anyio.Event()  # set: the supervisor's next tick runs now
        self._sweep_due = True  # the next tick also asks for pending agents and reaps
        self._stopping = False

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

    def wake(self, agents: Iterable[str] | None = None) -> list[str]:
        """Wake the named loops now; unknown names (or None) make the next tick run at once."""
        if agents is None:
            self._sweep_due = True
            self._poke.set()
            return sorted(self._entries)
        woken = []
        for name in agents:
            entry = self._entries.get(name)
            if entry is not None and entry.loop is not None:
                entry.loop.wake()
                woken.append(name)
            else:
                self._poke.set()  # maybe an agent registered a moment ago
        return woken

    async def interrupt(
        self, agent: str, *, message_id: str | None, by: str, reason: str | None
    ) -> dict[str, Any]:
        """Stop ``agent``'s running turn (``delivery.interrupt``); NotFound without a loop."""
        entry = self._entries.get(agent)
        if entry is None or entry.loop is None:
            raise NotFound(f"no delivery loop runs for {agent!r}")
        return await interrupt_turn(entry.loop, message_id=message_id, by=by, reason=reason)

    def recheck(self) -> None:
        """Wake-ups may have been lost (a full wake queue): the next tick runs now and wakes every
        loop with claimable mail (one ``pending_agents`` query when the store changed)."""
        self._poke.set()

    def retry(self, agents: Iterable[str]) -> list[str]:
        """Dead letters of ``agents`` were re-queued: their loops drop any backoff, step now."""
        retried = []
        for name in agents:
            entry = self._entries.get(name)
            if entry is not None and entry.loop is not None:
                entry.loop.retry_now()
                retried.append(name)
        self.wake(None)  # also covers an agent whose loop is (re)starting
        return sorted(retried)

    def stop(self) -> None:
        """Claim nothing more; loops finish their delivery in flight, then ``run()`` returns."""
        self._stopping = True
        self._poke.set()
        for entry in self._entries.values():
            entry.halt()

    def abort(self) -> None:
        """Stop, cancelling deliveries in flight (they are released, not acked)."""
        self.stop()
        for entry in self._entries.values():
            if entry.loop is not None:
                entry.loop.abort()
