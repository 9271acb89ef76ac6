"""RpcChannel: a long-lived agent spoken to in JSON-RPC 2.0 lines over its stdio (ACP, Codex).

The shared shape of ``AcpChannel`` and ``CodexAppChannel``: the process is ``StdinHost``'s
(start, restart with capped backoff, the process group's end on ``aclose``); this base adds our
numbered calls (``Calls``), the once-per-start handshake that opens or resumes the stored session
(``_open_session``, bounded by ``settings.<kind>_start_timeout_s``), one turn per batch
(``_start_turn`` returns the ``Call`` that settles when the turn ends; ``_verdict`` says whether
it may be acked) and the stall timer, armed only while a turn runs. The agent's own requests
get ``client_answer``; notifications go to ``_on_notification``.
A new session id is stored before the first turn, so a crash cannot fork it silently.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

import anyio
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.acp_rpc import Call, Calls, client_answer, encode
from agentmaild.channels.base import Channel
from agentmaild.channels.claude import SessionSaver, agent_env, store_session_saver
from agentmaild.channels.commands import render_argv
from agentmaild.channels.login import failed_turn
from agentmaild.channels.stdin import DELIVERY_MARKER
from agentmaild.channels.stdin_host import StdinHost, _Process
from agentmaild.channels.stdin_turns import parse_event
from agentmaild.channels.usage import UsageMeter
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent, Batch
from agentmaild.procs.journal import ProcJournal
from agentmaild.procs.lines import Line
from agentmaild.store.location import StoreLocation

START_TIMEOUT_S = 180.0  # node CLIs took ~20 s to answer initialize on a loaded machine


class RpcChannel(StdinHost, Channel, abc.ABC):
    """Owns the agent's process and session; one turn in flight at a time."""

    kind = "rpc"
    protocol = "rpc"
    interruptible = True
    logger: FilteringBoundLogger

    def __init__(
        self,
        agent: Agent,
        config: Config,
        store_path: Path | StoreLocation,
        *,
        save_session: SessionSaver | None = None,
        procs: ProcJournal | None = None,
    ) -> None:
        if not agent.command:
            raise AgentUnavailable(f"the {self.kind} channel needs a command")
        super().__init__(agent, config, store_path, procs)
        key = f"{self.kind.replace('-', '_')}_start_timeout_s"
        self._start_timeout_s = positive_setting(agent, key, START_TIMEOUT_S)
        self._save = save_session or store_session_saver(self.store, agent.name)
        self._session_id_value: str | None = agent.session_id
        self._env = agent_env(agent, db=self.store, delivery_id=DELIVERY_MARKER)
        self._calls = Calls()
        self._ready: _Process | None = None  # the process whose handshake finished
        self._prompt: Call | None = None
        self._writing = False
        self._last_reason: str | None = None
        self._usage = UsageMeter()  # the running turn's: its notifications and its answer
        self._earlier: str | None = None
        self._log = self.logger.bind(agent=agent.name, channel=self.kind)

    # -- what a protocol supplies ---------------------------------------------------------
    @abc.abstractmethod
    async def _open_session(self, proc: _Process) -> str:
        """Initialize the process and open (resume or create) the session; its id."""

    @abc.abstractmethod
    async def _start_turn(self, proc: _Process, session: str, text: str) -> Call:
        """Send one batch; the returned call settles when the turn has ended."""

    @abc.abstractmethod
    def _verdict(self, call: Call) -> str | None:
        """Why the ended turn may not be acked, or None when it may."""

    def _on_notification(self, message: dict[str, Any]) -> None:
        """A notification from the agent (no id); ignored unless a protocol needs it."""

    async def _cancel_turn(self, proc: _Process) -> str:
        """Ask the agent to stop its running turn, the protocol's way; what was sent."""
        raise DeliveryFailed(f"{self.protocol} has no interrupt")

    async def _during_turn(self, proc: _Process, session: str, call: Call) -> None:
        """Runs while the turn does (cancelled at its end): mid-turn delivery, where a protocol
        can add input to a running turn (Codex's ``turn/steer``)."""

    # -- the Channel API ------------------------------------------------------------------
    async def is_busy(self) -> bool:
        if self._in_turn():
            return True
        self._earlier = None
        if self._proc is not None and self._proc.running:
            return False
        earlier, holder = await self._earlier_process(), self._held_by()
        if earlier is not None:
            self._earlier = f"pid {earlier} of an earlier daemon still runs"
        elif holder is not None:
            self._earlier = f"pid {holder} holds session {self._session_id()}"
        return self._earlier is not None

    def busy_reason(self) -> str | None:
        if self._in_turn():
            return "in turn"
        return self._earlier

    async def deliver(self, batch: Batch, text: str) -> None:
        if self._closed:
            raise AgentUnavailable(f"{self.kind} channel is closed")
        if self._in_turn():
            raise AgentBusy("a turn is still running")
        self._writing = True
        try:
            proc = await self._ensure_process()
            session = await self._handshake(proc)
            self._usage = UsageMeter()
            call = await self._start_turn(proc, session, text)
            self._prompt = call
            if proc.child is not None:
                proc.child.set_stall_timeout(self._stall_timeout_s)
        finally:
            self._writing = False
        # Cancelled here, the turn runs on in the agent: busy until it ends.
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._during_turn, proc, session, call)
            await call.done.wait()
            tg.cancel_scope.cancel()
        if proc.child is not None:
            proc.child.set_stall_timeout(None)  # idle between turns is not a stall
        if isinstance(call.result, dict):
            self._usage.feed(call.result)  # ACP's prompt answer
        self.last_usage = self._usage.total()  # the loop records it, acked or not
        reason = self._verdict(call)
        self._last_reason = reason
        if reason is not None:
            self._log.info(f"{self.kind}.turn_failed", delivery_id=batch.delivery_id, reason=reason)
            failed = failed_turn(self.agent, reason, reason)  # not logged in: unavailable
            self._last_reason = failed.message
            raise failed
        self._failures = 0

    async def interrupt(self) -> str:
        """The protocol's own stop (``_cancel_turn``); a turn still running ``kill_grace_s``
        later ends with the process group (SIGINT, then TERM and KILL), and the next deliver
        starts the process again, resuming the session."""
        proc, call = self._proc, self._prompt
        if proc is None or proc.child is None or call is None or call.done.is_set():
            raise DeliveryFailed("no turn of this daemon is running")
        grace = self._spawn.kill_grace_s
        try:
            how = await self._cancel_turn(proc)
        except DeliveryFailed as exc:
            how = exc.message
        else:
            with anyio.move_on_after(grace):
                await call.done.wait()
            if call.done.is_set():
                return f"{how}: the turn ended, the process stays"
        await proc.child.interrupt(grace)
        return f"{how}; process group {proc.child.pid} stopped"

    async def aclose(self) -> None:
        await super().aclose()
        self._calls.fail_all("the channel was closed")

    def describe(self) -> dict[str, object]:
        proc = self._proc
        return {
            "pid": proc.child.pid if proc is not None and proc.child is not None else None,
            "running": proc is not None and proc.running,
            "starts": self._starts,
            "protocol": self.protocol,
            "session_id": self._session_id_value,
            "last_error": self._last_reason,
            "log": str(self.log_path),
        }

    # -- the wire -------------------------------------------------------------------------
    async def _handshake(self, proc: _Process) -> str:
        """Open the session: once per process start, bounded by the start timeout."""
        if self._ready is proc and self._session_id_value is not None:
            return self._session_id_value
        with anyio.move_on_after(self._start_timeout_s):
            session = await self._open_session(proc)
            self._ready = proc
            return session
        if proc.child is not None:
            await proc.child.terminate()  # a hung start: the next deliver starts afresh
        raise DeliveryFailed(f"no session within {self._start_timeout_s:g}s of the start")

    async def _new_session(self, session: object, method: str) -> str:
        """Store a session the agent just opened, before its first turn."""
        if not isinstance(session, str) or not session:
            raise DeliveryFailed(f"{method} answered no session id")
        await self._save(session)  # before the first turn: a crash cannot fork it silently
        self._session_id_value = session
        self._log.info(f"{self.kind}.session_new", session_id=session)
        return session

    async def _result(self, proc: _Process, method: str, params: dict[str, Any]) -> Any:
        call = await self._send(proc, method, params)
        await call.done.wait()
        if call.error is not None:
            raise DeliveryFailed(f"{method}: {call.error}")
        return call.result

    async def _send(self, proc: _Process, method: str, params: dict[str, Any]) -> Call:
        call, line = self._calls.new(method, params)
        await self._write_line(proc, line, method, call)
        return call

    async def _notify(self, proc: _Process, method: str, params: dict[str, Any]) -> None:
        line = encode({"jsonrpc": "2.0", "method": method, "params": params})
        await self._write_line(proc, line, method, None)

    async def _write_line(
        self, proc: _Process, line: bytes, method: str, call: Call | None
    ) -> None:
        child = proc.child
        if child is None or not await child.send(line):
            if call is not None:
                call.settle(error="the agent process no longer reads its stdin")
            if child is not None:
                await child.terminate()  # so the next deliver starts a fresh one
            raise DeliveryFailed(f"{method}: write failed")

    async def _argv(self) -> list[str]:
        assert self.agent.command is not None
        values = {
            "agent": self.agent.name,
            "session_id": self._session_id_value or "",
            "delivery_id": "",
        }
        return render_argv(self.agent.command, values)

    def _on_line(self, proc: _Process, line: Line) -> None:
        proc.lines += 1
        message = parse_event(line)
        if message is None:
            return
        if "method" in message and "id" in message and proc.child is not None:
            self._log.info(f"{self.kind}.agent_request", method=str(message.get("method"))[:80])
            if self._tg is not None:
                self._tg.start_soon(proc.child.send, client_answer(message))
        elif "method" in message:
            self._on_notification(message)
        else:
            self._calls.answer(message)

    def _ended(self, proc: _Process) -> None:
        super()._ended(proc)
        child = proc.child
        if child is not None and child.stalled:  # e.g. OpenCode retrying an HTTP 500 in silence
            reason = f"stalled: no output for {self._stall_timeout_s:g}s, process group killed"
        else:
            code = child.returncode if child is not None else None
            reason = f"the agent process exited (exit code {code})"
        self._calls.fail_all(reason)
        if self._prompt is not None:
            self._prompt.settle(error=reason)  # a turn that is no call of ours (Codex)

    def _session_id(self) -> str | None:
        return None  # no session-holder files to consult, unlike Claude

    def _in_turn(self) -> bool:
        return self._writing or (self._prompt is not None and not self._prompt.done.is_set())


def positive_setting(agent: Agent, key: str, default: float) -> float:
    value = agent.settings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise AgentUnavailable(f"settings.{key} must be a positive number, got {value!r}")
    return float(value)
