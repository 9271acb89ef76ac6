"""Supervisor: one supervised DeliveryLoop per non-pull agent, kept in step with the registry.

It owns the poll tick: one ``PRAGMA data_version`` per tick while nothing changes; when the store
changed, one registry read (agents added, changed or removed start, restart or stop their loops)
and one "which agents have deliverable mail" query that wakes just those loops. A loop that crashes
is logged and restarted with capped backoff; each loop waits on its own channel, so one agent's
failures never slow another's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import structlog

from agentmaild.channels.base import Channel
from agentmaild.config import Config
from agentmaild.config.sections import daemon_host
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.roster import COUNTERS, Entry, Roster, in_flight_of
from agentmaild.delivery.types import Clock, LoopSettings
from agentmaild.errors import AgentmaildError, AgentUnavailable
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, ChannelKind
from agentmaild.store.aio import AsyncMailStore, Gate

log = structlog.get_logger(__name__)

ChannelFactory = Callable[[Agent, Config], Channel]

# A change to any of these means a new channel (and loop); state, session_id, turn_state do not.
_CHANNEL_FIELDS = (
    "channel",
    "command",
    "cwd",
    "tmux_target",
    "tmux_socket",
    "preset",
    "poll_interval_s",
    "settings",
)
# Every this many seconds the tick asks for pending agents even if data_version did not move.
_SWEEP_INTERVAL_S = 30.0
_MIN_TICK_S = 0.01
_CLOSE_TIMEOUT_S = 10.0


def _channel_key(agent: Agent) -> tuple[Any, ...]:
    return tuple(repr(getattr(agent, f)) for f in _CHANNEL_FIELDS)


class Supervisor(Roster):
    """Runs the loops; ``wake``/``pause``/``resume``/``stop``/``abort`` are sync, never block."""

    def __init__(
        self,
        store: AsyncMailStore,
        mailer: Mailer,
        config: Config,
        factory: ChannelFactory,
        *,
        gate: Gate | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__()
        self._store = store
        self._mailer = mailer
        self._config = config
        self._factory = factory
        self._gate = gate
        self._registry_version: int | None = None  # as of the last sync()
        self._clock = clock
        self._tg: anyio.abc.TaskGroup | None = None
        self._host = daemon_host(config.daemon)  # agents of another host are its daemon's

    # -- running ----------------------------------------------------------------------------
    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Start a loop per agent, report started, tick until ``stop()``; loops finish first."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await self.sync()
            task_status.started()
            await self._tick_forever()
        self._tg = None
        log.info("supervisor.stopped")

    async def _tick_forever(self) -> None:
        last_sweep = self._clock()
        while not self._stopping:
            with anyio.move_on_after(self._tick_interval()):
                await self._poke.wait()
            self._poke = anyio.Event()
            if self._stopping:
                return
            # Sweep at least once a lease, so an abandoned claim waits one lease at most.
            if self._clock() - last_sweep >= min(_SWEEP_INTERVAL_S, self._config.daemon.lease_s):
                self._sweep_due, last_sweep = True, self._clock()
            try:
                await self._tick()
            except AgentmaildError as exc:  # the store is unwell; the next tick tries again
                log.warning("supervisor.tick_failed", error=exc.message)
            for entry in self._entries.values():
                if entry.loop is not None:
                    entry.loop.check_busy()

    async def _tick(self) -> None:
        changed = True if self._gate is None else await self._gate.changed()
        if changed and await self._registry_moved():
            await self.sync()
        if not (changed or self._sweep_due):
            return
        if self._sweep_due:
            # A loop that crashed between claim and settle leaves its claim behind; once the
            # lease is over it goes back to pending under the same delivery id.
            reaped = await self._store.reap_expired(now=time.time())
            if reaped:
                log.warning("supervisor.reaped_expired", deliveries=[d for d, _ in reaped])
        self._sweep_due = False
        pending = (
            await self._gate.pending_agents()
            if self._gate is not None
            else await self._store.pending_agents()
        )
        for name in pending:
            entry = self._entries.get(name)
            if entry is not None and entry.loop is not None:
                entry.loop.wake()

    def _tick_interval(self) -> float:
        overrides = [
            e.agent.poll_interval_s for e in self._entries.values() if e.agent.poll_interval_s
        ]
        return max(_MIN_TICK_S, min([self._config.daemon.poll_interval_s, *overrides]))

    async def _registry_moved(self) -> bool:
        """Whether an agent's registration changed since the last sync (mail moving does not)."""
        if self._gate is None:
            return True
        return await self._gate.registry_version() != self._registry_version

    async def sync(self) -> None:
        """Diff the registry against the running loops: start, restart or stop loops."""
        if self._tg is None or self._stopping:
            return
        if self._gate is not None:
            # Read before the registry: a change landing in between shows up as a new version.
            self._registry_version = await self._gate.registry_version()
        agents = await self._store.list_agents()
        wanted = {
            a.name: a
            for a in agents
            if a.channel != ChannelKind.PULL and a.host in (None, self._host)
        }
        for name, entry in list(self._entries.items()):
            agent = wanted.get(name)
            if agent is None:
                # Its turn is cut short and the batch given back uncounted: the channel's close
                # then stops the process group (TERM, grace, KILL) instead of a stall timeout.
                in_flight = in_flight_of(entry)
                log.info("supervisor.agent_removed", agent=name, in_flight_delivery=in_flight)
                entry.retired = True
                entry.halt(abandon="agent removed")
                del self._entries[name]
            elif _channel_key(agent) != _channel_key(entry.agent):
                log.info("supervisor.agent_changed", agent=name)
                entry.agent = agent
                entry.halt()  # _supervise starts a fresh channel and loop for the new agent
            else:
                entry.agent = agent
        for name, agent in wanted.items():
            if name not in self._entries:
                entry = Entry(agent)
                self._entries[name] = entry
                self._tg.start_soon(self._supervise, entry, name=f"loop:{name}")

    async def _supervise(self, entry: Entry) -> None:
        while not (entry.retired or self._stopping):
            entry.kick = anyio.Event()
            try:
                await self._run_once(entry)
            except AgentUnavailable as exc:  # no channel can be built for it (yet): no traceback
                self._crashed(entry, exc, log.warning)
            except Exception as exc:  # logged, then restarted with backoff
                self._crashed(entry, exc, log.exception)
            else:
                continue
            with anyio.move_on_after(self._restart_delay(entry.crashes)):
                await entry.kick.wait()

    def _crashed(self, entry: Entry, exc: Exception, emit: Callable[..., Any]) -> None:
        entry.crashes += 1
        entry.last_crash = f"{type(exc).__name__}: {exc}"
        emit(
            "supervisor.loop_crashed",
            agent=entry.agent.name,
            crashes=entry.crashes,
            error=entry.last_crash,
            restart_in_s=round(self._restart_delay(entry.crashes), 3),
        )

    async def _run_once(self, entry: Entry) -> None:
        agent = entry.agent
        if entry.requeue:
            await self._requeue_own(entry)
        channel = self._factory(agent, self._config)
        loop = DeliveryLoop(
            agent,
            channel,
            self._store,
            self._mailer,
            LoopSettings.from_config(self._config.daemon, agent),
            clock=self._clock,
            gated=True,
        )
        loop.paused = self._all_paused or agent.name in self._paused
        entry.loop = loop
        log.info("supervisor.loop_started", agent=agent.name, channel=agent.channel)
        try:
            # Entered here, in the loop's own task: a channel may own tasks (stdin's reader)
            # for exactly as long as its loop runs.
            async with channel:
                await loop.run()
        finally:
            for key in COUNTERS:
                entry.totals[key] += getattr(loop, key)
            entry.requeue = entry.requeue or loop.claim_unsure
            entry.loop = None
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT_S):
                await channel.aclose()  # idempotent; bounded even if __aexit__ was cut short
        if not loop.stopping:
            raise RuntimeError("delivery loop returned without being stopped")

    async def _requeue_own(self, entry: Entry) -> None:
        """Before a loop whose claim failed is restarted: that claim may have committed with its
        answer lost, leaving a batch claimed by nobody for a whole lease. No loop of this agent
        runs now and this daemon is its host's only one, so every claim of the agent is such an
        orphan: back to pending under its delivery id. A failure here is one more crash."""
        name = entry.agent.name
        reaped = await self._store.reap_expired(
            now=time.time(), everything=True, host=self._host, agent=name
        )
        entry.requeue = False
        if reaped:
            log.warning("supervisor.requeued_unsure_claims", agent=name,
                        deliveries=[d for d, _ in reaped])

    def _restart_delay(self, crashes: int) -> float:
        d = self._config.daemon
        base = max(d.backoff_initial_s, 0.05) * 2 ** min(crashes - 1, 16)
        return float(min(max(d.backoff_max_s, 0.05), base))

    # -- control (sync; wake, retry, stop and abort are the roster's) ------------------------
    def update_config(self, config: Config) -> None:
        """Apply a reloaded config: new settings at once; new channels if their section changed."""
        channels_changed = (config.spawn, config.stdin, config.tmux) != (
            self._config.spawn,
            self._config.stdin,
            self._config.tmux,
        )
        self._config = config
        for entry in self._entries.values():
            if entry.loop is None:
                continue
            if channels_changed:
                entry.halt()
            else:
                entry.loop.settings = LoopSettings.from_config(config.daemon, entry.agent)
        self._poke.set()
