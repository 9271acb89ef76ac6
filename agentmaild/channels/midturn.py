"""Mid-turn deliveries a channel hands to its agent's running turn itself (Codex's
``turn/steer``): the mail ``mid_turn_priority`` lets in, claimed through ``store.midturn`` under a
delivery id of its own, acked (history outcome ``mid-turn``) once the agent accepted it, given back
to wait for the turn's end when the agent refused it.

The policy is the agent's ``mid_turn_priority`` setting, else ``[delivery] mid_turn_priority``.
While a turn runs the channel looks every ``LOOK_S`` with a read (no lock, no write); only mail
that is there is claimed, in one write. The store work runs in a worker thread on the store's
cold-path port (``store.ports``), as the tmux channel's reads do.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread

from agentmaild.config import Config
from agentmaild.ids import new_id
from agentmaild.models import Agent
from agentmaild.render import inject
from agentmaild.store import midturn
from agentmaild.store.location import StoreLocation
from agentmaild.store.ports import INJECT_RESERVE, Port

LOOK_S = 0.25  # how often a running turn's channel looks for mail to hand over


class MidTurn:
    """One agent's mid-turn claims on its store (see the module docstring)."""

    def __init__(self, agent: Agent, config: Config, location: StoreLocation) -> None:
        own = agent.settings.get("mid_turn_priority")
        policy = own if own in midturn.POLICIES else config.delivery.mid_turn_priority
        self.rank = midturn.policy_rank(policy)
        self.agent = agent.name
        self.location = location
        self.max_chars = max(config.daemon.batch_max_chars, INJECT_RESERVE + 1000)
        self._port: Port | None = None
        self._limiter = anyio.CapacityLimiter(1)

    @property
    def on(self) -> bool:
        return self.rank >= 0

    async def take(self) -> tuple[str, str, float] | None:
        """Claim what waits, rendered: (delivery id, text, when it began); None when nothing."""
        if not self.on or not await self._run(self._waiting):
            return None
        taken: tuple[str, str, float] | None = await self._run(self._claim)
        return taken

    async def ack(self, delivery_id: str, began: float) -> None:
        await self._run(lambda port: port.write(
            lambda: midturn.mid_turn_ack(port.claims(), self.agent, delivery_id, began)))

    async def give_back(self, delivery_id: str) -> None:
        await self._run(lambda port: port.write(
            lambda: midturn.mid_turn_undo(port.claims(), delivery_id)))

    async def close(self) -> None:
        port, self._port = self._port, None
        if port is not None:
            await anyio.to_thread.run_sync(port.close, limiter=self._limiter)

    def _waiting(self, port: Port) -> bool:
        return midturn.mid_turn_waiting(port.claims(), self.agent, self.rank)

    def _claim(self, port: Port) -> tuple[str, str, float] | None:
        def work() -> tuple[str, str, float] | None:
            taken = port.mid_turn_take(self.agent, self.rank, self.max_chars - INJECT_RESERVE)
            if taken is None:
                return None
            rows, count, nudges, lead = taken
            delivery_id = new_id("dlv")
            text, ids = inject.fit_rows(rows, self.agent, count, nudges, inject.plain,
                                        self.max_chars, lead, delivery_id)  # fmt: skip
            began = midturn.mid_turn_claim(port.claims(), self.agent, delivery_id, ids)
            return delivery_id, text, began

        return port.write(work)

    async def _run(self, fn: Any) -> Any:
        def call() -> Any:
            if self._port is None:
                from agentmaild.store.kinds import open_port

                self._port = open_port(self.location)
            return None if self._port is None else fn(self._port)

        return await anyio.to_thread.run_sync(call, limiter=self._limiter)
