"""VendorSpawnChannel: one headless Codex, Gemini CLI or OpenCode turn per batch, one session.

The rendered batch goes to the CLI on stdin (stdin is then closed); the preset (``vendors``)
builds the argv and reads the JSON events the CLI prints.

Sessions: Gemini CLI starts a session under an id we choose (``--session-id``), stored before
the turn starts, as for Claude. Codex and OpenCode choose their own: the id the CLI announces
(Codex ``thread.started``, its first line; OpenCode with its first event) is written to the
agent's row *while the turn still runs*. Every later turn resumes it; a delivery whose id could
not be stored fails (never acked). A daemon crash between the fork and that write leaves a
session we never learned: the turn runs on as an orphan (the next daemon reports the agent busy
until it ends), the batch is redelivered into a new session, and that redelivery logs
``spawn.session_started_on_redelivery`` so the fork is never silent. A Gemini session whose first
turn failed before the model answered can be neither resumed nor re-created under its id: a new
id is chosen and stored at once (``spawn.session_replaced``; the old one held no answer); a stored
id Gemini refuses to resume is first started afresh under the same id.

Busy signal: our own turn runs; a process an earlier daemon started still runs (process journal);
for Codex, a live process holds the thread's writer lock (``~/.codex/thread-writer-locks``), e.g.
a human's ``codex resume``. Gemini CLI and ``opencode run`` expose no such lock.
Ack contract: exit 0, stdin read to the end, and the vendor's own success signal.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.claude import SessionSaver, agent_env, store_session_saver
from agentmaild.channels.commands import check_executable
from agentmaild.channels.spawn import SpawnChannel, _Launch
from agentmaild.channels.stream_events import StreamJsonEvents
from agentmaild.channels.vendors import TurnVerdict, VendorPreset, codex_thread_holder
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentmaildError, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent, Batch
from agentmaild.procs.child import Child, ChildExit
from agentmaild.procs.journal import ProcJournal
from agentmaild.store.location import StoreLocation


@dataclass(slots=True)
class VendorEvents(StreamJsonEvents):
    """A turn's JSON events as the preset reads them: the session id and the verdict."""

    preset: VendorPreset | None = None
    verdict: TurnVerdict = field(default_factory=TurnVerdict)
    session_id: str | None = None
    session_seen: anyio.Event = field(default_factory=anyio.Event)
    save_error: str = ""

    def _record(self, event: dict[str, Any]) -> None:
        assert self.preset is not None
        if self.session_id is None:
            self.session_id = self.preset.session_of(event)
            if self.session_id is not None:
                self.session_seen.set()
        self.preset.judge(event, self.verdict)


class VendorSpawnChannel(SpawnChannel):
    """SpawnChannel with a vendor preset's argv, session handling and ack rule."""

    kind = "spawn"

    def __init__(
        self,
        agent: Agent,
        config: Config,
        store_path: Path | StoreLocation,
        *,
        preset: VendorPreset,
        save_session: SessionSaver | None = None,
        procs: ProcJournal | None = None,
    ) -> None:
        super().__init__(agent, config, store_path, procs=procs)
        self.preset = preset
        self.session_id = agent.session_id
        self.established = agent.session_id is not None  # a stored id is assumed to exist
        self._saver = save_session or store_session_saver(self.store, agent.name)
        self._home = self._env("").get("HOME", "")
        self._events: VendorEvents | None = None
        self._holder: int | None = None

    async def is_busy(self) -> bool:
        if await super().is_busy():
            self._holder = None
            return True
        self._holder = self._held_by()
        return self._holder is not None

    def busy_reason(self) -> str | None:
        reason = super().busy_reason()
        if reason is None and self._holder is not None:
            return f"session held by pid {self._holder}"
        return reason

    def _held_by(self) -> int | None:
        if self.preset.name != "codex" or self.session_id is None or not self._home:
            return None
        return codex_thread_holder(self._home, self.session_id)

    def _env(self, delivery_id: str) -> dict[str, str]:
        env = agent_env(self.agent, db=self.store, delivery_id=delivery_id)
        env = self.preset.scrub(env)
        env.update(self.agent.settings.get("env") or {})  # explicit values win over the scrub
        return env

    async def _deliver(self, batch: Batch, text: str) -> None:
        holder = self._held_by()
        if holder is not None:
            raise AgentBusy(f"session {self.session_id} is held by live pid {holder}")
        bound = self._log.bind(delivery_id=batch.delivery_id, attempt=batch.attempt)
        if self.session_id is None and self.preset.chooses_id:
            await self._choose_session()
        elif self.session_id is None and batch.attempt > 1:
            # An earlier attempt may have started a session whose id never reached the store.
            bound.warning("spawn.session_started_on_redelivery", preset=self.preset.name)
        launch = self._vendor_launch(batch)
        events = VendorEvents(preset=self.preset)
        self._events = events
        try:
            done, unread = await self._run_turn(launch, text.encode(), events, bound)
        finally:
            self._events = None
        await self._adopt(events, bound)
        await self._learn(done, events, bound)
        self._judge_vendor(done, unread, events)

    async def _choose_session(self) -> None:
        chosen = str(uuid.uuid4())
        try:
            with anyio.CancelScope(shield=True):
                await self._saver(chosen)
        except AgentmaildError as exc:
            raise AgentUnavailable(f"cannot store the new session id: {exc.message}") from exc
        self.session_id, self.established = chosen, False

    async def _learn(
        self, done: ChildExit, events: VendorEvents, bound: FilteringBoundLogger
    ) -> None:
        """After a chosen-id turn that failed before the model answered. A resume the CLI
        refused (the id was stored but its first turn never answered): start it under the same
        id next time. A start under our id that failed: that id is spent (Gemini CLI can neither
        resume nor re-create it), so a new one is chosen and stored at once."""
        if not self.preset.chooses_id or self.session_id is None:
            return
        if events.verdict.success or events.verdict.answered:
            self.established = True
            return
        if self.established:
            if done.returncode == self.preset.lost_session_exit and events.session_id is None:
                bound.warning("spawn.session_not_resumable", session_id=self.session_id)
                self.established = False
            return
        bound.warning("spawn.session_replaced", old=self.session_id)
        self.session_id = None
        with contextlib.suppress(AgentUnavailable):  # else the next turn chooses again
            await self._choose_session()

    def _vendor_launch(self, batch: Batch) -> _Launch:
        from agentmaild.channels import mcp_wiring

        resume = self.established or not self.preset.chooses_id
        command = self.agent.command or (self.preset.executable,)
        if self.preset.name == "codex":  # its overrides go before the prompt's "-"
            command = (command[0], *mcp_wiring.codex_flags(self.agent.name), *command[1:])
        argv = self.preset.build_argv(command, self.session_id, resume=resume)
        cwd = self._cwd()
        env = self._env(batch.delivery_id)
        if self.preset.name == "opencode":
            env.setdefault("OPENCODE_CONFIG_CONTENT", mcp_wiring.opencode_config(self.agent.name))
        if cwd is not None:
            # OpenCode takes its project directory from PWD, not from its working directory: an
            # inherited PWD would point it at the daemon's directory.
            env["PWD"] = cwd
        check_executable(argv[0], cwd, env)
        return _Launch(argv=argv, cwd=cwd, env=env, delivery_id=batch.delivery_id)

    async def _await_exit(self, child: Child) -> ChildExit:
        events = self._events
        if events is None:
            return await child.wait()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._adopt_when_seen, events)
            done = await child.wait()
            tg.cancel_scope.cancel()  # the write itself is shielded: it lands or never started
        return done

    async def _adopt_when_seen(self, events: VendorEvents) -> None:
        await events.session_seen.wait()
        await self._adopt(events, self._log)

    async def _adopt(self, events: VendorEvents, bound: FilteringBoundLogger) -> None:
        """Store the session id the turn announced, once; a failure fails the delivery."""
        seen = events.session_id
        if seen is None or seen == self.session_id or events.save_error:
            return
        with anyio.CancelScope(shield=True):
            try:
                await self._saver(seen)
            except AgentmaildError as exc:
                events.save_error = exc.message
                return
        if self.session_id is not None:
            bound.warning("spawn.session_changed", old=self.session_id, new=seen)
        bound.info("spawn.session_stored", session_id=seen, preset=self.preset.name)
        self.session_id, self.established = seen, True

    def _judge_vendor(self, done: ChildExit, unread: int, events: VendorEvents) -> None:
        verdict = events.verdict
        if events.save_error:
            reason = f"cannot store the session id {events.session_id}: {events.save_error}"
            self._last_reason = reason
            raise AgentUnavailable(reason)
        try:
            self._judge(done, unread, events)
        except DeliveryFailed as exc:
            if not (verdict.failure or verdict.last_error):
                raise
            reason = f"{exc.message}; {verdict.reason()}"
            self._last_reason = reason
            raise DeliveryFailed(reason) from None
        if not verdict.success:
            reason = f"exit 0 without {self.preset.success_signal}: {verdict.reason()}"
            self._last_reason = reason
            raise DeliveryFailed(reason)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "preset": self.preset.name, "session_id": self.session_id}
