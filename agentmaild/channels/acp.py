"""AcpChannel: a long-lived Agent Client Protocol agent (``gemini --acp``, ``opencode acp``, …).

The daemon starts the agent's command and speaks JSON-RPC 2.0 lines over its stdio:
``initialize`` → ``authenticate`` (only when the agent advertises a method we may use:
``settings.acp_auth_method``, else ``gemini-api-key``) → ``session/load`` of the stored session
(when the agent can load; a failed load starts afresh) or ``session/new`` → one
``session/prompt`` per batch. A new session id is stored before the first prompt.
Ack contract: ``deliver`` returns when the prompt's response says ``stopReason: "end_turn"``.
Any other stop reason, a JSON-RPC error (e.g. the model API failed), a crash mid-turn or
``stall_timeout_s`` of silence raise ``DeliveryFailed``: the loop retries the same delivery id.
Busy: from our prompt's write until its response; with no process of ours running, while a
process an earlier daemon started still runs. Requests the agent sends us are answered safely
(permission: cancelled; fs/terminal: not supported); ``session/update`` notifications are logged
at debug only. Restarts (capped exponential backoff) and the process group's end on ``aclose``
are ``StdinHost``'s, as for the stdin channel.
Stored as channel ``stdin`` with ``settings.protocol = "acp"`` (no schema change).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.acp_rpc import Call, Calls, client_answer
from agentmaild.channels.base import Channel
from agentmaild.channels.claude import SessionSaver, agent_env, store_session_saver
from agentmaild.channels.commands import render_argv, stall_timeout
from agentmaild.channels.stdin import DELIVERY_MARKER
from agentmaild.channels.stdin_host import StdinHost, _Process
from agentmaild.channels.stdin_turns import parse_event
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent, Batch
from agentmaild.procs.journal import ProcJournal
from agentmaild.procs.lines import Line
from agentmaild.procs.logfiles import log_path

log: FilteringBoundLogger = structlog.get_logger(__name__)

PROTOCOL = "acp"
DEFAULT_AUTH = "gemini-api-key"
START_TIMEOUT_S = 180.0  # node CLIs took ~20 s to answer initialize on a loaded machine


class AcpChannel(StdinHost, Channel):
    """Owns the ACP agent's process and session; one prompt in flight at a time."""

    kind = "acp"

    def __init__(
        self,
        agent: Agent,
        config: Config,
        store_path: Path,
        *,
        save_session: SessionSaver | None = None,
        procs: ProcJournal | None = None,
    ) -> None:
        super().__init__()
        if not agent.command:
            raise AgentUnavailable("the acp channel needs a command (e.g. gemini --acp)")
        self.agent = agent
        self.session = None
        self._procs = procs
        self.store_path = store_path.absolute()
        self.log_path = log_path(self.store_path, agent.name)
        self._spawn = config.spawn
        self._backoff = (config.stdin.restart_backoff_initial_s, config.stdin.restart_backoff_max_s)
        self._ack_on = "turn"
        self._stall_timeout_s = stall_timeout(agent, config.stdin.stall_timeout_s)
        self._start_timeout_s = _positive(agent, "acp_start_timeout_s", START_TIMEOUT_S)
        self._save = save_session or store_session_saver(self.store_path, agent.name)
        self._session_id_value: str | None = agent.session_id
        self._env = agent_env(agent, db=self.store_path, delivery_id=DELIVERY_MARKER)
        self._calls = Calls()
        self._ready: _Process | None = None  # the process whose handshake finished
        self._prompt: Call | None = None
        self._writing = False
        self._last_reason: str | None = None
        self._earlier: int | None = None
        self._log = log.bind(agent=agent.name, channel=self.kind)

    # -- the Channel API ------------------------------------------------------------------
    async def is_busy(self) -> bool:
        if self._in_turn():
            return True
        self._earlier = None
        if self._proc is not None and self._proc.running:
            return False
        self._earlier = await self._earlier_process()
        return self._earlier is not None

    def busy_reason(self) -> str | None:
        if self._in_turn():
            return "in turn"
        if self._earlier is not None:
            return f"pid {self._earlier} of an earlier daemon still runs"
        return None

    async def deliver(self, batch: Batch, text: str) -> None:
        if self._closed:
            raise AgentUnavailable("acp channel is closed")
        if self._in_turn():
            raise AgentBusy("a prompt is still running")
        self._writing = True
        try:
            proc = await self._ensure_process()
            session = await self._handshake(proc)
            params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
            call = await self._send(proc, "session/prompt", params)
            self._prompt = call
            assert proc.child is not None
            proc.child.set_stall_timeout(self._stall_timeout_s)
        finally:
            self._writing = False
        # Cancelled here, the prompt runs on in the agent: busy until its response arrives.
        await call.done.wait()
        if proc.child is not None:
            proc.child.set_stall_timeout(None)  # idle between prompts is not a stall
        reason = call.error
        stop = call.result.get("stopReason") if isinstance(call.result, dict) else None
        if reason is None and stop != "end_turn":
            reason = f"stopReason {stop!r}, not end_turn"
        self._last_reason = reason
        if reason is not None:
            self._log.info("acp.turn_failed", delivery_id=batch.delivery_id, reason=reason)
            raise DeliveryFailed(reason)
        self._failures = 0

    async def __aenter__(self) -> AcpChannel:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.aclose()
        finally:
            tg, self._tg = self._tg, None
            if tg is not None:
                await tg.__aexit__(exc_type, exc, tb)

    async def aclose(self) -> None:
        self._closed = True
        proc = self._proc
        with anyio.CancelScope(shield=True):
            if proc is not None and not proc.finished.is_set():
                if proc.child is not None:
                    await proc.child.close_stdin()  # EOF: an ACP agent ends on its own
                with anyio.move_on_after(self._spawn.kill_grace_s):
                    await proc.finished.wait()
                proc.scope.cancel()  # open_child's exit: TERM, grace, KILL the group, reap
                await proc.finished.wait()
        self._calls.fail_all("the channel was closed")

    def describe(self) -> dict[str, object]:
        proc = self._proc
        return {
            "pid": proc.child.pid if proc is not None and proc.child is not None else None,
            "running": proc is not None and proc.running,
            "starts": self._starts,
            "protocol": PROTOCOL,
            "session_id": self._session_id_value,
            "last_error": self._last_reason,
            "log": str(self.log_path),
        }

    # -- the protocol ---------------------------------------------------------------------
    async def _handshake(self, proc: _Process) -> str:
        """initialize, authenticate, load or open the session: once per process start."""
        if self._ready is proc and self._session_id_value is not None:
            return self._session_id_value
        with anyio.move_on_after(self._start_timeout_s):
            return await self._open_session(proc)
        if proc.child is not None:
            await proc.child.terminate()  # a hung start: the next deliver starts afresh
        raise DeliveryFailed(f"no session within {self._start_timeout_s:g}s of the start")

    async def _open_session(self, proc: _Process) -> str:
        init = await self._result(
            proc,
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    "terminal": False,
                },
            },
        )
        auth = _auth_method(init, self.agent.settings.get("acp_auth_method"))
        if auth is not None:
            await self._result(proc, "authenticate", {"methodId": auth})
        cwd = self.agent.cwd or str(Path.cwd())
        can_load = _can_load(init)
        stored = self._session_id_value
        if stored is not None and can_load:
            params = {"sessionId": stored, "cwd": cwd, "mcpServers": []}
            call = await self._send(proc, "session/load", params)
            await call.done.wait()
            if call.error is None:
                self._ready = proc
                self._log.info("acp.session_loaded", session_id=stored)
                return stored
            self._log.warning("acp.load_failed", session_id=stored, reason=call.error)
        opened = await self._result(proc, "session/new", {"cwd": cwd, "mcpServers": []})
        session = opened.get("sessionId") if isinstance(opened, dict) else None
        if not isinstance(session, str) or not session:
            raise DeliveryFailed("session/new answered no sessionId")
        await self._save(session)  # before the first prompt: a crash cannot fork it silently
        self._session_id_value = session
        self._ready = proc
        self._log.info("acp.session_new", session_id=session)
        return session

    async def _result(self, proc: _Process, method: str, params: dict[str, Any]) -> Any:
        call = await self._send(proc, method, params)
        await call.done.wait()
        if call.error is not None:
            raise DeliveryFailed(f"{method}: {call.error}")
        return call.result

    async def _send(self, proc: _Process, method: str, params: dict[str, Any]) -> Call:
        call, line = self._calls.new(method, params)
        child = proc.child
        if child is None or not await child.send(line):
            call.settle(error="the agent process no longer reads its stdin")
            if child is not None:
                await child.terminate()  # so the next deliver starts a fresh one
            raise DeliveryFailed(f"{method}: write failed")
        return call

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
            self._log.info("acp.agent_request", method=str(message.get("method"))[:80])
            if self._tg is not None:
                self._tg.start_soon(proc.child.send, client_answer(message))
        elif "method" not in message:
            self._calls.answer(message)

    def _ended(self, proc: _Process) -> None:
        super()._ended(proc)
        self._calls.fail_all(
            f"the agent process exited (exit code "
            f"{proc.child.returncode if proc.child is not None else None})"
        )

    def _session_id(self) -> str | None:
        return None  # no session-holder files to consult, unlike Claude

    def _in_turn(self) -> bool:
        return self._writing or (self._prompt is not None and not self._prompt.done.is_set())


def is_acp(agent: Agent) -> bool:
    return agent.settings.get("protocol") == PROTOCOL


def _auth_method(init: Any, wanted: object) -> str | None:
    methods = init.get("authMethods") if isinstance(init, dict) else None
    ids = [m.get("id") for m in methods or [] if isinstance(m, dict)]
    choice = wanted if isinstance(wanted, str) and wanted else DEFAULT_AUTH
    return choice if choice in ids else None


def _can_load(init: Any) -> bool:
    caps = init.get("agentCapabilities") if isinstance(init, dict) else None
    return isinstance(caps, dict) and caps.get("loadSession") is True


def _positive(agent: Agent, key: str, default: float) -> float:
    value = agent.settings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise AgentUnavailable(f"settings.{key} must be a positive number, got {value!r}")
    return float(value)
