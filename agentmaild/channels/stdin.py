"""StdinChannel: a long-lived agent process owned by the daemon, fed one stream-json line a batch.

Busy signal: a turn is running — from our write until that uuid's turn ended (``ack_on="turn"``);
with the Claude preset also while no process of ours runs and a live process listed in
``~/.claude/sessions/*.json`` holds the agent's session.
Ack contract (``ack_on="turn"``, the default): ``deliver`` returns when the turn that consumed our
uuid (= the delivery id) ended well: ``command_lifecycle`` ``completed`` for the uuid, or — for
CLIs without lifecycle events — a ``result`` with ``is_error: false`` after our line was replayed.
``cancelled``, ``is_error``, a crash mid-turn or ``stall_timeout_s`` of silence (the group is
killed) raise ``DeliveryFailed``; the loop retries with the same delivery id, so the same uuid.
``ack_on="write"``: ``deliver`` returns once the line is written to the pipe.
A dead process is restarted by the next ``deliver`` after a capped exponential backoff
(``restart_backoff_initial_s`` … ``max_s``); the Claude preset resumes its session.

Ownership: the process lives in a host task the channel creates on the first ``deliver`` and
always ends in ``aclose()`` (close stdin, wait ``kill_grace_s``, then TERM/KILL the group through
``open_child``'s scope, reaped). A host task rather than a task group: the supervisor calls
``deliver`` inside its own cancel scopes and ``aclose`` later, so a task group opened in
``deliver`` could never be exited in order.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.base import Channel
from agentmaild.channels.claude import (
    ClaudeSession,
    SessionSaver,
    agent_env,
    line_uuid,
    store_session_saver,
)
from agentmaild.channels.commands import user_line
from agentmaild.channels.login import failed_turn
from agentmaild.channels.stdin_host import StdinHost
from agentmaild.channels.stdin_turns import Turn
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.ids import new_id
from agentmaild.models import Agent, Batch
from agentmaild.procs.journal import ProcJournal
from agentmaild.store.location import StoreLocation

log: FilteringBoundLogger = structlog.get_logger(__name__)

ACK_ON = ("turn", "write")
# Tells agentmaild's hooks inside the process that the daemon feeds it: they stay quiet.
DELIVERY_MARKER = "stdin"


class StdinChannel(StdinHost, Channel):
    """Owns the agent's long-lived process; one turn in flight at a time."""

    kind = "stdin"
    interruptible = True

    def __init__(
        self,
        agent: Agent,
        config: Config,
        store_path: Path | StoreLocation,
        *,
        save_session: SessionSaver | None = None,
        procs: ProcJournal | None = None,
    ) -> None:
        super().__init__(agent, config, store_path, procs)
        self._ack_on = _ack_on(agent, config.stdin.ack_on)
        self._claude = agent.preset == "claude" or not agent.command
        saver = save_session or store_session_saver(self.store, agent.name)
        self.session = ClaudeSession(agent.session_id, saver) if self._claude else None
        self._env = agent_env(agent, db=self.store, delivery_id=DELIVERY_MARKER)
        self._writing = False
        self._last_reason: str | None = None
        self._holder: int | None = None  # who held the session at the last is_busy()
        self._earlier: int | None = None  # an earlier daemon's process seen by the last is_busy()
        self._log = log.bind(agent=agent.name, channel=self.kind)

    # -- the Channel API ------------------------------------------------------------------
    async def is_busy(self) -> bool:
        self._holder = None
        if self._in_turn():
            return True
        running = self._proc is not None and self._proc.running
        self._earlier = None
        if running:
            return False
        self._holder = self._held_by()
        if self._holder is None:
            self._earlier = await self._earlier_process()
        return self._holder is not None or self._earlier is not None

    def busy_reason(self) -> str | None:
        if self._in_turn():
            return "in turn"
        if self._holder is not None:
            return f"session held by pid {self._holder}"
        if self._earlier is not None:
            return f"pid {self._earlier} of an earlier daemon still runs"
        return None

    async def deliver(self, batch: Batch, text: str) -> None:
        if self._closed:
            raise AgentUnavailable("stdin channel is closed")
        if self._in_turn():
            raise AgentBusy("a turn is still running")
        self._writing = True
        try:
            proc = await self._ensure_process()
            turn = Turn(line_uuid(batch))
            await self._write(proc, turn, user_line(text, turn.uuid))
        finally:
            self._writing = False
        if self._ack_on == "write":
            self._failures = 0
            return
        # Cancelled here, the turn runs on in the agent: it stays busy until that turn ends.
        await turn.done.wait()
        self._last_reason, self.last_usage = turn.error, turn.usage.total()
        if turn.error is not None:
            self._log.info("stdin.turn_failed", delivery_id=batch.delivery_id, reason=turn.error)
            failed = failed_turn(self.agent, turn.error, turn.error)  # not logged in: unavailable
            self._last_reason = failed.message
            raise failed
        self._failures = 0

    async def interrupt(self) -> str:
        """The stream-json protocol's interrupt (Claude Code's ``control_request``) ends the turn
        and keeps the process; a turn still running ``kill_grace_s`` later (or a command that
        speaks no such protocol) ends with the process group: SIGINT, then TERM and KILL. The
        next deliver starts the process again, resuming the session."""
        proc, turn = self._proc, self._turn
        if proc is None or proc.child is None or turn is None or turn.done.is_set():
            raise DeliveryFailed("no turn of this daemon is running")
        grace = self._spawn.kill_grace_s
        if self._claude and await proc.child.send(interrupt_request()):
            with anyio.move_on_after(grace):
                await turn.done.wait()
            if turn.done.is_set():
                return "control_request interrupt: the turn ended, the process stays"
        await proc.child.interrupt(grace)
        with anyio.move_on_after(grace):
            await proc.finished.wait()
        return f"process group {proc.child.pid} stopped"

    async def aclose(self) -> None:
        await super().aclose()
        if self._turn is not None:
            self._turn.settle("the channel was closed")

    def describe(self) -> dict[str, object]:
        proc = self._proc
        return {
            "pid": proc.child.pid if proc is not None and proc.child is not None else None,
            "running": proc is not None and proc.running,
            "starts": self._starts,
            "ack_on": self._ack_on,
            "session_id": self.session.id if self.session is not None else self.agent.session_id,
            "last_error": self._last_reason,
            "log": str(self.log_path),
        }

    def _in_turn(self) -> bool:
        return self._writing or (self._turn is not None and not self._turn.done.is_set())


def interrupt_request() -> bytes:
    """Claude Code's stream-json input line that stops the running turn."""
    request = {"type": "control_request", "request_id": new_id("req"),
               "request": {"subtype": "interrupt"}}  # fmt: skip
    return json.dumps(request, separators=(",", ":")).encode() + b"\n"


def _ack_on(agent: Agent, default: str) -> str:
    value = agent.settings.get("ack_on", default)
    if value not in ACK_ON:
        raise AgentUnavailable(f"settings.ack_on must be one of {ACK_ON}, got {value!r}")
    return str(value)
