"""CodexAppChannel: a long-lived ``codex app-server`` (JSON-RPC 2.0 lines on its stdio).

Handshake once per process start: ``initialize{clientInfo}`` → the ``initialized`` notification
→ ``thread/resume{threadId}`` of the stored thread (a failed resume, e.g. "no rollout found" for a
thread whose first turn never ran, starts afresh with a warning) or ``thread/start{cwd}``, whose
new thread id is stored before the first turn. Then one ``turn/start{threadId, input}`` per batch.
Ack contract: ``deliver`` returns when the notification ``turn/completed`` for our thread says
``status: "completed"``. A ``failed`` or ``interrupted`` turn (the model API failed: Codex sends
``error`` then ``turn/completed{status: failed}``), a JSON-RPC error on ``turn/start``, a crash
mid-turn or ``stall_timeout_s`` of silence raise ``DeliveryFailed``: the loop retries the same
delivery id. Busy: from our ``turn/start`` until its ``turn/completed``, and while Codex says the
thread is ``active`` (``thread/status/changed``); before our app-server starts, while another
process holds the thread's writer lock (``~/.codex/thread-writer-locks/<id>.lock``). Approval
requests are answered "not supported" (run it with ``approval_policy = "never"``). While a turn
runs, mail ``mid_turn_priority`` lets in goes into it by ``turn/steer{threadId, expectedTurnId,
input}`` (``channels.midturn``), acked once Codex accepted it, given back when it refused. Provider,
model and sandbox come from the command (``-c model_provider=…``) or ``~/.codex/config.toml``.
The turn's tokens come from ``thread/tokenUsage/updated`` (``channels.usage``).
Stored as channel ``stdin`` with ``settings.protocol = "codex-app"`` (no schema change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild import __version__
from agentmaild.channels.acp_rpc import REASON_MAX, Call
from agentmaild.channels.midturn import LOOK_S, MidTurn
from agentmaild.channels.rpc_channel import RpcChannel
from agentmaild.channels.stdin_host import _Process
from agentmaild.channels.vendors import flock_holder
from agentmaild.config import Config
from agentmaild.errors import DeliveryFailed
from agentmaild.mail.jsoninput import storable
from agentmaild.models import Agent

log: FilteringBoundLogger = structlog.get_logger(__name__)

PROTOCOL = "codex-app"
STEER_TIMEOUT_S = 30.0  # turn/steer unanswered this long: the batch is given back


class CodexAppChannel(RpcChannel):
    """A Codex app-server's process and thread; one turn in flight at a time."""

    kind = "codex-app"
    protocol = PROTOCOL
    logger = log

    def __init__(self, agent: Agent, config: Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(agent, config, *args, **kwargs)
        self._thread_active = False
        self._turn_error: str | None = None
        self._turn_id: str | None = None
        self._mid_turn = MidTurn(agent, config, self.store)

    async def _open_session(self, proc: _Process) -> str:
        self._thread_active = False
        info = {"name": "agentmaild", "title": "agentmaild", "version": __version__}
        await self._result(proc, "initialize", {"clientInfo": info})
        await self._notify(proc, "initialized", {})
        cwd = self.agent.cwd or str(Path.cwd())
        stored = self._session_id_value
        if stored is not None:
            params = {"threadId": stored, "cwd": cwd, "excludeTurns": True}
            call = await self._send(proc, "thread/resume", params)
            await call.done.wait()
            if call.error is None:
                self._log.info("codex-app.thread_resumed", session_id=stored)
                return stored
            self._log.warning("codex-app.resume_failed", session_id=stored, reason=call.error)
        opened = await self._result(proc, "thread/start", {"cwd": cwd})
        return await self._new_session(_thread_id(opened), "thread/start")

    async def _start_turn(self, proc: _Process, session: str, text: str) -> Call:
        # Registered before the request: turn/completed may be read before we see the answer.
        turn = Call("turn")
        self._prompt = turn
        self._turn_error = None
        params = {"threadId": session, "input": [{"type": "text", "text": text}]}
        self._turn_id = None
        started = await self._send(proc, "turn/start", params)
        await started.done.wait()
        if started.error is not None:
            turn.settle(error=f"turn/start: {started.error}")
        else:
            self._turn_id = _turn_id(started.result)
        return turn

    async def _cancel_turn(self, proc: _Process) -> str:
        params = {"threadId": self._session_id_value, "turnId": self._turn_id}
        await self._send(proc, "turn/interrupt", params)  # turn/completed says "interrupted"
        return "turn/interrupt"

    async def _during_turn(self, proc: _Process, session: str, call: Call) -> None:
        """Mail ``mid_turn_priority`` lets in goes into the running turn by ``turn/steer``."""
        while self._mid_turn.on and not call.done.is_set():
            await anyio.sleep(LOOK_S)
            if self._turn_id is None:
                continue
            with anyio.CancelScope(shield=True):  # a claimed batch is acked or given back
                await self._steer(proc, session, self._turn_id)

    async def _steer(self, proc: _Process, session: str, turn_id: str) -> None:
        taken = await self._mid_turn.take()
        if taken is None:
            return
        delivery_id, text, began = taken
        params = {"threadId": session, "expectedTurnId": turn_id,
                  "input": [{"type": "text", "text": text}]}  # fmt: skip
        error: str | None = "no answer"
        with anyio.move_on_after(STEER_TIMEOUT_S):
            try:
                steer = await self._send(proc, "turn/steer", params)
                await steer.done.wait()
                error = steer.error
            except DeliveryFailed as exc:
                error = str(exc)
        if error is None:
            await self._mid_turn.ack(delivery_id, began)
            self._log.info("codex-app.steered", delivery_id=delivery_id, turn_id=turn_id)
        else:  # the turn ended meanwhile, or Codex refused: the mail waits for the next turn
            await self._mid_turn.give_back(delivery_id)
            self._log.info("codex-app.steer_refused", delivery_id=delivery_id, reason=error)

    async def aclose(self) -> None:
        await super().aclose()
        with anyio.CancelScope(shield=True):
            await self._mid_turn.close()

    def _verdict(self, call: Call) -> str | None:
        if call.error is not None:
            return call.error
        turn = call.result if isinstance(call.result, dict) else {}
        status = turn.get("status")
        if status == "completed":
            return None
        why = _error_text(turn.get("error")) or self._turn_error or "no detail"
        return storable(f"turn {status}: {why}"[:REASON_MAX])

    def _on_notification(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        if not isinstance(params, dict) or params.get("threadId") != self._session_id_value:
            return
        method = message.get("method")
        if method == "thread/status/changed":
            status = params.get("status")
            self._thread_active = isinstance(status, dict) and status.get("type") == "active"
        elif method == "error":
            self._turn_error = _error_text(params.get("error")) or self._turn_error
        elif method == "thread/tokenUsage/updated":
            self._usage.feed(message)
        elif method == "turn/completed" and self._prompt is not None:
            self._prompt.settle(result=params.get("turn"))

    def _ended(self, proc: _Process) -> None:
        self._thread_active = False
        super()._ended(proc)

    def _in_turn(self) -> bool:
        return super()._in_turn() or self._thread_active

    def _session_id(self) -> str | None:
        return self._session_id_value

    def _held_by(self) -> int | None:
        """A live process holding the thread's writer lock (e.g. a person's ``codex resume``):
        checked before our app-server starts, never while it runs (it holds the lock itself)."""
        thread, home = self._session_id_value, self._env.get("HOME")
        if thread is None or not home:
            return None
        codex_home = Path(self._env.get("CODEX_HOME") or Path(home, ".codex"))
        return flock_holder(codex_home / "thread-writer-locks" / f"{thread}.lock")


def _turn_id(started: Any) -> str | None:
    """``turn/start``'s answer: ``{turn: {id, …}}``."""
    turn = started.get("turn") if isinstance(started, dict) else None
    value = turn.get("id") if isinstance(turn, dict) else None
    return value if isinstance(value, str) and value else None


def _thread_id(opened: Any) -> object:
    thread = opened.get("thread") if isinstance(opened, dict) else None
    return thread.get("id") if isinstance(thread, dict) else None


def _error_text(error: object) -> str | None:
    """A Codex ``TurnError`` (``message``, ``codexErrorInfo``) in a few words."""
    if not isinstance(error, dict):
        return None
    kind = error.get("codexErrorInfo")
    text = str(error.get("message") or "")
    return f"{text} ({kind})" if isinstance(kind, str) else text or None
