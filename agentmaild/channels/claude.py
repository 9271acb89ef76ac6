"""The Claude Code preset: argv, session choice and ack rule for headless ``claude -p`` turns.

``ClaudeSpawnChannel`` runs one ``claude -p`` per batch (spawn channel, ``preset = "claude"``).
Busy signal: our own turn runs, or a live process listed in ``$HOME/.claude/sessions/*.json``
holds the agent's session (another daemon's orphan, a human's ``claude --resume``) — so there are
never two processes on one session, also across daemon restarts.
Ack contract: exit 0, a ``result`` event with ``is_error: false`` and, when the CLI emitted any
``command_lifecycle`` events, ``completed`` for our uuid (= the delivery id).

Sessions: the first turn of an agent without a session id gets ``--session-id <uuid4>``, chosen
here and persisted through a ``SessionSaver`` (by default a short write to the agent's row in the
SQLite store) *before* the turn starts, so a crash cannot lose it; every later turn gets
``--resume <id>``. ``ClaudeSession`` is shared with the stdin channel.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from agentmaild.channels.commands import check_executable, child_env, user_line
from agentmaild.channels.spawn import SpawnChannel, _Launch
from agentmaild.channels.stream_events import StreamJsonEvents
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentmaildError, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent, Batch
from agentmaild.procs.child import ChildExit
from agentmaild.procs.journal import ProcJournal
from agentmaild.store.location import StoreLocation

CLAUDE_EXECUTABLE = "claude"
STREAM_JSON_FLAGS = (
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--replay-user-messages",
)

SessionSaver = Callable[[str], Awaitable[None]]


def store_session_saver(location: StoreLocation, agent: str) -> SessionSaver:
    """Persist a new session id on the agent's row: one short transaction on a fresh connection."""

    def save_sync(session_id: str) -> None:
        from agentmaild.store.kinds import open_store

        store = open_store(location)
        try:
            store.update_agent(agent, {"session_id": session_id})
        finally:
            store.close()

    async def save(session_id: str) -> None:
        # Not abandoned on cancel: the write either lands before the turn starts or the turn
        # does not start.
        await anyio.to_thread.run_sync(save_sync, session_id)

    return save


def line_uuid(batch: Batch) -> str:
    """The stream-json ``uuid`` for this attempt: the delivery id, plus ``.<attempt>`` on a
    redelivery.

    Claude Code skips a user line whose uuid is already in the session transcript — it answers
    with the replay and ``command_lifecycle completed`` but never calls the model — even when the
    turn that recorded it failed. Re-sending a failed batch under its bare delivery id would
    therefore be "completed" without reaching the model; the attempt number (one per claim)
    keeps every write unique while the delivery id stays the prefix and in the rendered text.
    """
    return batch.delivery_id if batch.attempt <= 1 else f"{batch.delivery_id}.{batch.attempt}"


def claude_argv(agent: Agent, session_args: list[str]) -> list[str]:
    """``claude`` + the stream-json flags + session flags; ``agent.command`` may replace
    the executable (its first element) and append extra arguments (the rest)."""
    from agentmaild.channels.mcp_wiring import claude_flags

    command = agent.command or (CLAUDE_EXECUTABLE,)
    return [command[0], *STREAM_JSON_FLAGS, *claude_flags(agent.name), *session_args, *command[1:]]


def agent_env(agent: Agent, *, db: StoreLocation, delivery_id: str) -> dict[str, str]:
    """The daemon's environment made safe for a child, plus ``settings["env"]`` on top."""
    env = child_env(os.environ, agent=agent.name, db=db, delivery_id=delivery_id)
    extra = agent.settings.get("env") or {}
    if not isinstance(extra, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in extra.items()
    ):
        raise AgentUnavailable("settings.env must be an object of string values")
    # Explicit per-agent values may set CLAUDE_CODE_* again: only *inherited* ones are dropped.
    env.update(extra)
    return env


def session_holder(home: str | Path, session_id: str) -> int | None:
    """The pid of a live process whose ``~/.claude/sessions/<pid>.json`` names ``session_id``.

    Files of dead processes (a crash leaves them behind) and unreadable files are ignored.
    """
    for path in Path(home, ".claude", "sessions").glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            continue  # being written or removed right now
        if not isinstance(record, dict) or record.get("sessionId") != session_id:
            continue
        pid = record.get("pid")
        if isinstance(pid, int) and pid > 0 and _alive(pid):
            return pid
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


class ClaudeSession:
    """Which session flag the next ``claude`` start gets, and the id chosen for a new agent."""

    def __init__(self, session_id: str | None, saver: SessionSaver) -> None:
        self.id = session_id
        # A stored id is assumed to exist in Claude's transcripts; observe() corrects that.
        self.established = session_id is not None
        self._saver = saver
        self._last_flag = ""

    async def args(self) -> list[str]:
        if self.id is None:
            chosen = str(uuid.uuid4())
            try:
                await self._saver(chosen)
            except AgentmaildError as exc:
                raise AgentUnavailable(f"cannot store the new session id: {exc.message}") from exc
            self.id = chosen
        self._last_flag = "--resume" if self.established else "--session-id"
        return [self._last_flag, self.id]

    def observe(self, *, init_seen: bool, error_before_init: bool, any_output: bool) -> None:
        """Learn from one failed or finished start: an ``init`` proves the session exists. A
        resume answered by an error result before any ``init`` ("No conversation found": the
        first turn died before Claude wrote its transcript) falls back to ``--session-id``; a
        ``--session-id`` start that died without a word ("already in use") switches to
        ``--resume``."""
        if init_seen:
            self.established = True
        elif error_before_init and self._last_flag == "--resume":
            self.established = False
        elif not any_output and self._last_flag == "--session-id":
            self.established = True


@dataclass(slots=True)
class ClaudeEvents(StreamJsonEvents):
    """StreamJsonEvents that keys ``command_lifecycle`` by ``command_uuid`` (our line's uuid;
    the event's own ``uuid`` is a fresh one) and notes the ``system/init`` event."""

    init_seen: bool = False
    lifecycle_seen: bool = False

    def _record(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "command_lifecycle":
            self.lifecycle_seen = True
            target = event.get("command_uuid")
            if isinstance(target, str):
                self.lifecycle[target] = str(event.get("state") or "")
            return
        if kind == "system" and event.get("subtype") == "init":
            self.init_seen = True
        StreamJsonEvents._record(self, event)


class ClaudeSpawnChannel(SpawnChannel):
    """SpawnChannel with Claude's argv, session handling and the stricter ack rule."""

    kind = "spawn"

    def __init__(
        self,
        agent: Agent,
        config: Config,
        store_path: Path | StoreLocation,
        *,
        save_session: SessionSaver | None = None,
        procs: ProcJournal | None = None,
    ) -> None:
        super().__init__(agent, config, store_path, procs=procs)
        self._success = "result"
        saver = save_session or store_session_saver(self.store, agent.name)
        self.session = ClaudeSession(agent.session_id, saver)
        self._home = agent_env(agent, db=self.store, delivery_id="").get("HOME", "")
        self._holder: int | None = None  # who held the session at the last is_busy()

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
        if self.session.id is None or not self._home:
            return None
        return session_holder(self._home, self.session.id)

    async def _deliver(self, batch: Batch, text: str) -> None:
        holder = self._held_by()
        if holder is not None:
            raise AgentBusy(f"session {self.session.id} is held by live pid {holder}")
        launch = self._claude_launch(batch, await self.session.args())
        events = ClaudeEvents()
        bound = self._log.bind(delivery_id=batch.delivery_id, attempt=batch.attempt)
        uuid_ = line_uuid(batch)
        done, unread = await self._run_turn(launch, user_line(text, uuid_), events, bound)
        if done.returncode != 0:
            self.session.observe(
                init_seen=events.init_seen,
                error_before_init=events.result_is_error is True and not events.init_seen,
                any_output=events.lines > 0,
            )
        else:
            self.session.observe(init_seen=True, error_before_init=False, any_output=True)
        try:
            self._judge(done, unread, events)
        except DeliveryFailed as exc:
            if not events.result_is_error or "is_error" in exc.message:
                raise
            reason = f"{exc.message}; result is_error: {events.result_summary or 'no detail'}"
            self._last_reason = reason
            raise DeliveryFailed(reason) from None
        self._judge_lifecycle(done, events, uuid_)

    def _judge_lifecycle(self, done: ChildExit, events: ClaudeEvents, uuid_: str) -> None:
        if not events.lifecycle_seen:
            return
        state = events.lifecycle.get(uuid_)
        if state != "completed":
            reason = f"command_lifecycle for our uuid ended {state or 'unseen'!r}"
            self._last_reason = reason
            raise DeliveryFailed(reason)

    def _claude_launch(self, batch: Batch, session_args: list[str]) -> _Launch:
        argv = claude_argv(self.agent, session_args)
        cwd = self._cwd()
        env = agent_env(self.agent, db=self.store, delivery_id=batch.delivery_id)
        check_executable(argv[0], cwd, env)
        return _Launch(argv=argv, cwd=cwd, env=env, delivery_id=batch.delivery_id)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "preset": "claude", "session_id": self.session.id}
